-- Every declared limit shared by tasks (crate::limits) and its size.
SELECT name, size FROM scheduler_limits ORDER BY name
