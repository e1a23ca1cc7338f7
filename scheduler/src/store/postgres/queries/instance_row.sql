-- Instance row $1 (a removed one too), locked for the upsert that reads it.
SELECT instance_of AS task, instance_key AS key, cron, timezone, args, enabled, next_run_at,
       next_tick, jitter_ms, last_scheduled_at, removed_at IS NOT NULL AS removed, instance_source,
       owners, labels, sla, limit_name, calendar
FROM scheduler_tasks
WHERE name = $1 AND instance_of IS NOT NULL
FOR UPDATE
