-- Ask for a manual run of task ?1 by ?2 at ?3 (now), with the arguments ?4 in place of the row's
-- own (NULL: its own), unless one is queued or the task is paused; a sharded task's shards (rows
-- `?1[i]`) each get one.
UPDATE scheduler_tasks
SET manual_at = ?3, manual_by = ?2, manual_args = ?4, updated_at = ?3
WHERE (name = ?1 OR shard_of = ?1) AND manual_at IS NULL AND paused_at IS NULL
