-- End task ?1's pause, with the next run ?2 the engine decided, at ?3 (now); a sharded task's
-- shards (rows `?1[i]`, same schedule) with it. A next run kept keeps its tick (a jittered start,
-- see crate::ticks::jitter); a new one is its own tick.
UPDATE scheduler_tasks
SET paused_at = NULL, paused_by = NULL, pause_reason = NULL, pause_until = NULL,
    next_run_at = ?2,
    next_tick = CASE WHEN next_run_at IS ?2 THEN next_tick END,
    updated_at = ?3
WHERE name = ?1 OR (shard_of = ?1 AND paused_at IS NOT NULL)
