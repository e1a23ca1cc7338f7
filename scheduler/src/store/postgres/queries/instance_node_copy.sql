-- Make each row of $1 (an instance's node or shard row, just created by a reconcile) a row of
-- the instance row at the same place in $2: its task, key, arguments, own owners, labels,
-- service levels, limit and jitter window copied.
UPDATE scheduler_tasks AS t
SET instance_of = o.instance_of, instance_key = o.instance_key, args = o.args,
    owners = o.owners, labels = o.labels, sla = o.sla, limit_name = o.limit_name,
    jitter_ms = o.jitter_ms
FROM unnest($1::text[], $2::text[]) AS c(name, of)
JOIN scheduler_tasks AS o ON o.name = c.of
WHERE t.name = c.name
