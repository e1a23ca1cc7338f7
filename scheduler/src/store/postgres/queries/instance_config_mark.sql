-- Make row $1 (just created or updated by the reconcile) the config's instance $3 of task $2,
-- with arguments $4 and its own owners $5 and labels $6 (JSON text; NULL: its task's): owned by
-- the config, not removed.
UPDATE scheduler_tasks
SET instance_of = $2, instance_key = $3, args = $4, owners = $5, labels = $6,
    instance_source = 'config', removed_at = NULL, updated_at = now()
WHERE name = $1
