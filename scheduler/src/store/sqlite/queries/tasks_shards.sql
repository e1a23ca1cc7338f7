-- Set the shard count of task row ?1 (after tasks_create, same transaction): ?2 the task's
-- shard count, ?3 the task a shard's row `name[i]` belongs to (NULL for a task's own row,
-- shard 0), ?4 now.
UPDATE scheduler_tasks
SET shards = ?2,
    shard_of = ?3,
    updated_at = ?4
WHERE name = ?1
