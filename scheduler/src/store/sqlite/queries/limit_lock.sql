-- The sizes of the limits named in the JSON array ?1 (limits shared by tasks, crate::limits).
-- SQLite's one writer serializes claims: nothing to lock.
SELECT name, size
FROM scheduler_limits
WHERE name IN (SELECT value FROM json_each(?1))
ORDER BY name
