-- An instance's own service levels (crate::instance): `sla`, the `sla` block of a config entry
-- as written (JSON text; NULL: its task's). Read with the row by the claim, the overdue read
-- and the hourly upkeep, so that whichever node runs or watches an instance judges it by its
-- own levels.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN sla TEXT;
