       name, cron, timezone, calendar, enabled, next_run_at, next_tick, lock_owner,
       lock_expires_at, last_run_at, last_finished_at, last_status, last_error,
       consecutive_failures, paused_at, paused_by, pause_reason, pause_until, retry_at,
       manual_at, missed_since, orphaned_since, disabled_at, shards, node_pin
