-- Everything about one task's row ($1), or every task's ($1 NULL), by name.
SELECT name, cron, timezone, calendar, enabled, next_run_at, next_tick, lock_owner, lock_expires_at,
       last_run_at,
       last_finished_at, last_status, last_error, consecutive_failures, paused_at, paused_by,
       pause_reason, pause_until, retry_at, manual_at, missed_since, orphaned_since, disabled_at,
       shards, node_pin
FROM scheduler_tasks
WHERE $1::text IS NULL OR name = $1
ORDER BY name
