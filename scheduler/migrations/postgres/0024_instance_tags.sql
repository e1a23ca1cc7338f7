-- An instance's own owners and labels (crate::instance): `owners` a JSON array of strings
-- (NULL: its task's), `labels` a JSON object of strings (NULL: none of its own; the task's
-- apply, its own win on a key). Read with the row by the claim, so that the node running an
-- instance tags its events from the store. An instance's own shared limit is `limit_name`
-- (0023). Columns without a default change only the catalog (no rewrite).
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN owners text;
ALTER TABLE scheduler_tasks ADD COLUMN labels text;
