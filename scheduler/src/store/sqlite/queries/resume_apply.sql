-- End task ?1's pause, with the next run ?2 the engine decided (its start) and its tick ?4 when
-- jitter shifted the start off it, at ?3 (now); a sharded task's shards (rows `?1[i]`, same
-- schedule) with it. A next run kept keeps its tick (a jittered start, see crate::ticks::jitter).
UPDATE scheduler_tasks
SET paused_at = NULL, paused_by = NULL, pause_reason = NULL, pause_until = NULL,
    next_run_at = ?2,
    next_tick = CASE WHEN next_run_at IS ?2 THEN next_tick ELSE ?4 END,
    updated_at = ?3
WHERE name = ?1 OR (shard_of = ?1 AND paused_at IS NOT NULL)
