-- Set the shard count of task row ?1 (after tasks_create, same transaction): ?2 the task's
-- shard count, ?3 the task a shard's or node's row (`name[i]`, `name[@node]`) belongs to (NULL
-- for a task's own row, shard 0), ?4 now, ?5 the node the row is pinned to (a broadcast task's
-- rows; '' for its own row, pinned to no node; NULL: any node). A row of a task takes the
-- task's pause (a row created while the task is paused is paused with it).
UPDATE scheduler_tasks
SET shards = ?2,
    shard_of = ?3,
    node_pin = ?5,
    paused_at = CASE WHEN ?3 IS NULL THEN paused_at
                     ELSE (SELECT o.paused_at FROM scheduler_tasks AS o WHERE o.name = ?3) END,
    paused_by = CASE WHEN ?3 IS NULL THEN paused_by
                     ELSE (SELECT o.paused_by FROM scheduler_tasks AS o WHERE o.name = ?3) END,
    pause_reason = CASE WHEN ?3 IS NULL THEN pause_reason
                        ELSE (SELECT o.pause_reason FROM scheduler_tasks AS o WHERE o.name = ?3) END,
    pause_until = CASE WHEN ?3 IS NULL THEN pause_until
                       ELSE (SELECT o.pause_until FROM scheduler_tasks AS o WHERE o.name = ?3) END,
    updated_at = ?4
WHERE name = ?1
