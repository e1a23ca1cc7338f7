-- Make row $1 (a broadcast instance's node row, just created by a reconcile) a row of instance
-- row $2: its task, key, arguments, own owners, labels, limit and jitter window copied.
UPDATE scheduler_tasks AS t
SET instance_of = o.instance_of, instance_key = o.instance_key, args = o.args,
    owners = o.owners, labels = o.labels, limit_name = o.limit_name, jitter_ms = o.jitter_ms
FROM scheduler_tasks AS o
WHERE t.name = $1 AND o.name = $2
