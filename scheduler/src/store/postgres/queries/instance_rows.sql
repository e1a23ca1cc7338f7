-- Instance rows named in $1 (removed ones too), locked for the batch upsert that reads them (in
-- the order of their names, so that two batches lock the rows they share in the same order).
SELECT name, instance_of AS task, instance_key AS key, cron, timezone, args, enabled, next_run_at,
       next_tick, jitter_ms, last_scheduled_at, removed_at IS NOT NULL AS removed, instance_source,
       owners, labels, sla, limit_name, calendar
FROM scheduler_tasks
WHERE name = ANY($1) AND instance_of IS NOT NULL
ORDER BY name
FOR UPDATE
