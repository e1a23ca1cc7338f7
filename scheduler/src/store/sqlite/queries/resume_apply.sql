-- End task ?1's pause, with the next run ?2 the engine decided, at ?3 (now); a sharded task's
-- shards (rows `?1[i]`, same schedule) with it.
UPDATE scheduler_tasks
SET paused_at = NULL, paused_by = NULL, pause_reason = NULL, pause_until = NULL,
    next_run_at = ?2, next_tick = NULL, updated_at = ?3
WHERE name = ?1 OR (shard_of = ?1 AND paused_at IS NOT NULL)
