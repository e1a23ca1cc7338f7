SELECT name, cron, timezone, enabled, next_run_at, last_scheduled_at, orphaned_since,
       now() AS db_now
FROM scheduler_tasks
ORDER BY name
