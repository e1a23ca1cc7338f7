-- Who owns an instance's row (crate::instance): `config` for an instance declared in the config
-- document (the reconciler creates, changes and disables it, and refuses an API or Rust upsert
-- of its key), NULL or `runtime` for one made at run time (through `Schedules` or the admin
-- API; a reconcile never touches it). NULL on every row that is not an instance. And the index
-- that reads an instance's runs (its history, its strip) without walking its task's others.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN instance_source TEXT;
CREATE INDEX scheduler_runs_instance_idx ON scheduler_runs (task_name, instance_key, id);
