-- Instances of a task (crate::instance): rows of scheduler_tasks named `task/key`, made at run
-- time, each with its own schedule, lock, fencing token and next run, run by the task's
-- handler. `instance_of` names the task (NULL: a task's own row, or a shard's), `instance_key`
-- the key, `args` the arguments as JSON text. `removed_at`: removed while a run of it was in
-- flight; no tick of it runs, and the row goes once its lock is released. A run of an instance
-- records its key in `scheduler_runs.instance_key` (NULL: the task's own run).
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN instance_of TEXT;
ALTER TABLE scheduler_tasks ADD COLUMN instance_key TEXT;
ALTER TABLE scheduler_tasks ADD COLUMN args TEXT;
ALTER TABLE scheduler_tasks ADD COLUMN removed_at INTEGER;
CREATE INDEX scheduler_tasks_instance_of_idx ON scheduler_tasks (instance_of, instance_key)
    WHERE instance_of IS NOT NULL;
ALTER TABLE scheduler_runs ADD COLUMN instance_key TEXT;
