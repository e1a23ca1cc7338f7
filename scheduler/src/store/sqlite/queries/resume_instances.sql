-- The rows of task ?1's instances holding its pause (paused at ?2 by ?3, as the task's own row
-- was), for ending it with the task's (the write transaction holds them).
SELECT name, cron, timezone, calendar, enabled, next_run_at, next_tick, lock_owner, lock_expires_at,
       last_run_at,
       last_finished_at, last_status, last_error, consecutive_failures, paused_at, paused_by,
       pause_reason, pause_until, retry_at, manual_at, missed_since, orphaned_since, disabled_at,
       shards, node_pin
FROM scheduler_tasks
WHERE instance_of = ?1 AND paused_at = ?2 AND paused_by IS ?3
ORDER BY name
