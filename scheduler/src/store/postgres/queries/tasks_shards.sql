-- Set the shard count of task rows (after tasks_create, same transaction): $1 row names, $2
-- the task's shard count, $3 the task a shard's row `name[i]` belongs to (NULL for a task's own
-- row, shard 0).
UPDATE scheduler_tasks AS t
SET shards = s.shards,
    shard_of = s.shard_of,
    updated_at = now()
FROM unnest($1::text[], $2::int4[], $3::text[]) AS s(name, shards, shard_of)
WHERE t.name = s.name
