-- Write instance row ?1 of task ?6, key ?7: cron ?2, zone ?3, enabled ?4, next run ?5 (its
-- start), arguments ?8, at ?9 (now), the next run's tick ?10 when jitter shifted its start, its
-- own jitter window ?11 (ms), as the upsert decided. An existing row is changed in place (its
-- lock, fence, retry and history kept); a removed one comes back. The task's pause in force
-- (?12 at, by ?13, for ?14, until ?15; NULL: none) is taken by a row not paused, as
-- pause_instances.sql gives it; a row paused keeps its pause. Its own owners ?16 and labels ?17
-- (JSON text; NULL: its task's) and its own limit ?18 (NULL: its task's) and its own levels ?19 (the `sla`
-- block as JSON text; NULL: its task's) are written as given.
-- Its own calendar ?20 (stored form; NULL: its task's, read by the claim) likewise.
-- Returns the row as written.
INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at, disabled_at, created_at,
                             updated_at, instance_of, instance_key, args, next_tick, jitter_ms,
                             paused_at, paused_by, pause_reason, pause_until, owners, labels,
                             limit_name, sla, calendar)
VALUES (?1, ?2, ?3, ?4, ?5, CASE WHEN ?4 THEN NULL ELSE ?9 END, ?9, ?9, ?6, ?7, ?8, ?10, ?11,
        ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
ON CONFLICT (name) DO UPDATE
SET cron = excluded.cron,
    timezone = excluded.timezone,
    enabled = excluded.enabled,
    next_run_at = excluded.next_run_at,
    next_tick = excluded.next_tick,
    jitter_ms = excluded.jitter_ms,
    disabled_at = CASE WHEN excluded.enabled THEN NULL
                       ELSE coalesce(scheduler_tasks.disabled_at, ?9) END,
    args = excluded.args,
    owners = excluded.owners,
    labels = excluded.labels,
    limit_name = excluded.limit_name,
    sla = excluded.sla,
    calendar = excluded.calendar,
    removed_at = NULL,
    paused_at = coalesce(scheduler_tasks.paused_at, excluded.paused_at),
    paused_by = CASE WHEN scheduler_tasks.paused_at IS NULL THEN excluded.paused_by
                     ELSE scheduler_tasks.paused_by END,
    pause_reason = CASE WHEN scheduler_tasks.paused_at IS NULL THEN excluded.pause_reason
                        ELSE scheduler_tasks.pause_reason END,
    pause_until = CASE WHEN scheduler_tasks.paused_at IS NULL THEN excluded.pause_until
                       ELSE scheduler_tasks.pause_until END,
    updated_at = ?9
RETURNING instance_of AS task, instance_key AS key, cron, timezone, args, enabled, next_run_at,
       next_tick, jitter_ms, last_scheduled_at, removed_at IS NOT NULL AS removed, instance_source,
       owners, labels, sla, limit_name, calendar
