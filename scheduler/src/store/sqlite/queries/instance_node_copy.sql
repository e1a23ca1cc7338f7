-- Make row ?1 (a broadcast instance's node row, just created by a reconcile) a row of instance
-- row ?2: its task, key, arguments, own owners, labels, limit and jitter window copied.
UPDATE scheduler_tasks
SET (instance_of, instance_key, args, owners, labels, limit_name, jitter_ms) =
    (SELECT o.instance_of, o.instance_key, o.args, o.owners, o.labels, o.limit_name, o.jitter_ms
     FROM scheduler_tasks AS o WHERE o.name = ?2)
WHERE name = ?1 AND EXISTS (SELECT 1 FROM scheduler_tasks AS o WHERE o.name = ?2)
