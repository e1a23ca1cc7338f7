-- Pause task $1: by $2, for $3, until $4 (NULL: until resumed). Returns the task if it exists
-- (and its shards' rows, `$1[i]`, paused with it).
UPDATE scheduler_tasks
SET paused_at = now(), paused_by = $2, pause_reason = $3, pause_until = $4, updated_at = now()
WHERE name = $1 OR shard_of = $1
RETURNING name
