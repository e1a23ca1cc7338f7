-- Give task ?1 the next run ?2 (its start; ?4 its tick when jitter shifted the start off it, NULL:
-- ?2 is the tick) if it is enabled, unlocked and has none; a row that got a next run or a lock
-- meanwhile is left alone. ?3 now. Returns the task when rescheduled.
UPDATE scheduler_tasks
SET next_run_at = ?2, next_tick = ?4, updated_at = ?3
WHERE name = ?1 AND enabled = 1 AND next_run_at IS NULL AND lock_token IS NULL
RETURNING name
