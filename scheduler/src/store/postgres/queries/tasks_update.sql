-- Update schedule (cron, zone, calendar) and enabled flag in place. Lock and pause columns are never touched, so a
-- running handler finishes undisturbed, no second run can start, and an operator's pause stays.
-- A NULL next run keeps the stored one (and its tick); a new one is its start, its tick in
-- next_tick when jitter shifted it (NULL: the start is the tick; see crate::ticks::jitter).
-- Disabling records since when.
UPDATE scheduler_tasks AS t
SET cron = u.cron,
    timezone = u.timezone,
    calendar = u.calendar,
    enabled = u.enabled,
    next_run_at = COALESCE(u.next_run_at, t.next_run_at),
    next_tick = CASE WHEN u.next_run_at IS NULL THEN t.next_tick ELSE u.next_tick END,
    disabled_at = CASE WHEN u.enabled THEN NULL
                       WHEN t.enabled THEN now()
                       ELSE t.disabled_at END,
    orphaned_since = NULL,
    updated_at = now()
FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::timestamptz[], $6::text[],
            $7::timestamptz[])
     AS u(name, cron, timezone, enabled, next_run_at, calendar, next_tick)
WHERE t.name = u.name
