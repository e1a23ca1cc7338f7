-- Set the shard count of task rows (after tasks_create, same transaction): $1 row names, $2
-- the task's shard count, $3 the task a shard's or node's row (`name[i]`, `name[@node]`)
-- belongs to (NULL for a task's own row, shard 0), $4 the node the row is pinned to (a
-- broadcast task's rows; '' for its own row, pinned to no node; NULL: any node). A row of a
-- task takes the task's pause (a row created while the task is paused is paused with it).
UPDATE scheduler_tasks AS t
SET shards = s.shards,
    shard_of = s.shard_of,
    node_pin = s.node_pin,
    paused_at = CASE WHEN s.shard_of IS NULL THEN t.paused_at ELSE o.paused_at END,
    paused_by = CASE WHEN s.shard_of IS NULL THEN t.paused_by ELSE o.paused_by END,
    pause_reason = CASE WHEN s.shard_of IS NULL THEN t.pause_reason ELSE o.pause_reason END,
    pause_until = CASE WHEN s.shard_of IS NULL THEN t.pause_until ELSE o.pause_until END,
    updated_at = now()
FROM unnest($1::text[], $2::int4[], $3::text[], $4::text[]) AS s(name, shards, shard_of, node_pin)
LEFT JOIN scheduler_tasks AS o ON o.name = s.shard_of
WHERE t.name = s.name
