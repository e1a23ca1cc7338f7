-- Update task ?1's schedule (cron, zone, calendar) and enabled flag in place. Lock and pause columns are never touched,
-- so a running handler finishes undisturbed, no second run can start, and an operator's pause
-- stays. A NULL next run ?5 keeps the stored one (and its tick); a new one is its start, its
-- tick ?8 when jitter shifted it (NULL: ?5 is the tick; see crate::ticks::jitter). Disabling
-- records since when (the SET expressions read the row as it was). ?2 cron, ?3 zone,
-- ?4 enabled, ?6 now, ?7 calendar.
UPDATE scheduler_tasks
SET cron = ?2,
    timezone = ?3,
    calendar = ?7,
    enabled = ?4,
    next_run_at = COALESCE(?5, next_run_at),
    next_tick = CASE WHEN ?5 IS NULL THEN next_tick ELSE ?8 END,
    disabled_at = CASE WHEN ?4 THEN NULL
                       WHEN enabled = 1 THEN ?6
                       ELSE disabled_at END,
    orphaned_since = NULL,
    updated_at = ?6
WHERE name = ?1
