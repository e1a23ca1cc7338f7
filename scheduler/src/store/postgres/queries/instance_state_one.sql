-- Instance row $1 (task $2, key $3; a removed one only with $4) with its state, as
-- `instance_states.sql` reads each of a page: read by its name alone.
SELECT name, cron, timezone, calendar, enabled, next_run_at, next_tick, lock_owner, lock_expires_at,
       last_run_at,
       last_finished_at, last_status, last_error, consecutive_failures, paused_at, paused_by,
       pause_reason, pause_until, retry_at, manual_at, missed_since, orphaned_since, disabled_at,
       shards, node_pin, instance_of AS task, instance_key AS key, args, instance_source,
       removed_at IS NOT NULL AS removed
FROM scheduler_tasks
WHERE name = $1 AND instance_of = $2 AND instance_key = $3
  AND ($4::boolean OR removed_at IS NULL)
