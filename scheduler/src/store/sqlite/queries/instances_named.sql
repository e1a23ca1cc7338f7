-- The instance rows named in ?1 (a JSON array; removed ones left out), by name: one read for
-- the runs of a page of many instances. The caller keeps those whose task and key it asked for.
SELECT instance_of AS task, instance_key AS key, cron, timezone, args, enabled, next_run_at,
       next_tick, jitter_ms, last_scheduled_at, removed_at IS NOT NULL AS removed, instance_source,
       owners, labels, sla, limit_name, calendar
FROM scheduler_tasks
WHERE name IN (SELECT value FROM json_each(?1)) AND instance_of IS NOT NULL
  AND removed_at IS NULL
ORDER BY name
