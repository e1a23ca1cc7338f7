-- End task $1's pause, with the next run $2 the engine decided (its start) and its tick $3 when
-- jitter shifted the start off it; a sharded task's shards (rows `$1[i]`, same schedule) with
-- it. A next run kept keeps its tick (a jittered start, see crate::ticks::jitter).
UPDATE scheduler_tasks
SET paused_at = NULL, paused_by = NULL, pause_reason = NULL, pause_until = NULL,
    next_run_at = $2,
    next_tick = CASE WHEN next_run_at IS NOT DISTINCT FROM $2 THEN next_tick ELSE $3 END,
    updated_at = now()
WHERE name = $1 OR (shard_of = $1 AND paused_at IS NOT NULL)
