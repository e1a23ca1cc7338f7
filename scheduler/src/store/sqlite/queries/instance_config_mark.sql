-- Make row ?1 (just created or updated by the reconcile) the config's instance ?3 of task ?2,
-- with arguments ?4 and its own owners ?6 and labels ?7 (JSON text; NULL: its task's), at ?5
-- (now): owned by the config, not removed.
UPDATE scheduler_tasks
SET instance_of = ?2, instance_key = ?3, args = ?4, owners = ?6, labels = ?7,
    instance_source = 'config', removed_at = NULL, updated_at = ?5
WHERE name = ?1
