-- Update tasks' schedules (cron, zone, calendar) and enabled flags in place, a batch of rows in
-- one statement (a change that reaches 10,000 instances is a few statements, not 10,000): ?1 a
-- JSON list of {name, cron, timezone, enabled, next_run_at, calendar, next_tick}, times in
-- microseconds, ?2 now. Lock and pause columns are never touched, so a running handler
-- finishes undisturbed, no second run can start, and an operator's pause stays. A null next run
-- keeps the stored one (and its tick); a new one is its start, next_tick the tick when jitter
-- shifted it (null: the start is the tick; see crate::ticks::jitter). Disabling records since
-- when (the SET expressions read the row as it was).
UPDATE scheduler_tasks AS t
SET cron = u.cron,
    timezone = u.timezone,
    calendar = u.calendar,
    enabled = u.enabled,
    next_run_at = COALESCE(u.next_run_at, t.next_run_at),
    next_tick = CASE WHEN u.next_run_at IS NULL THEN t.next_tick ELSE u.next_tick END,
    disabled_at = CASE WHEN u.enabled = 1 THEN NULL
                       WHEN t.enabled = 1 THEN ?2
                       ELSE t.disabled_at END,
    orphaned_since = NULL,
    updated_at = ?2
FROM (SELECT value ->> '$.name' AS name,
             value ->> '$.cron' AS cron,
             value ->> '$.timezone' AS timezone,
             value ->> '$.enabled' AS enabled,
             value ->> '$.next_run_at' AS next_run_at,
             value ->> '$.calendar' AS calendar,
             value ->> '$.next_tick' AS next_tick
      FROM json_each(?1)) AS u
WHERE t.name = u.name
