SELECT name, cron, timezone, enabled, next_run_at, last_scheduled_at, orphaned_since
FROM scheduler_tasks
ORDER BY name
