-- Pause task ?1 at ?5 (now): by ?2, for ?3, until ?4 (NULL: until resumed). Returns the task if
-- it exists. A sharded task's shards (rows `?1[i]`) are paused with it.
UPDATE scheduler_tasks
SET paused_at = ?5, paused_by = ?2, pause_reason = ?3, pause_until = ?4, updated_at = ?5
WHERE name = ?1 OR shard_of = ?1
RETURNING name
