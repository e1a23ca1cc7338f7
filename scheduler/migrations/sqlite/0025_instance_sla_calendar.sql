-- An instance's own service levels (crate::instance): `sla`, the `sla` block of a config entry
-- as written (JSON text; NULL: its task's). Read with the row by the claim, the overdue read
-- and the hourly upkeep, so that whichever node runs or watches an instance judges it by its
-- own levels.
-- An instance's own calendar needs no column: it is stored resolved in `calendar` (0013), as a
-- task's is; an instance without one has its task's, read by the claim from its task's row.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN sla TEXT;
