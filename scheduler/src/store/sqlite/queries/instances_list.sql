-- The instances of task ?1 (removed ones left out), by key: their own
-- rows, not their shards' (`task/key[i]`).
SELECT instance_of AS task, instance_key AS key, cron, timezone, args, enabled, next_run_at,
       next_tick, jitter_ms, last_scheduled_at, removed_at IS NOT NULL AS removed, instance_source,
       owners, labels, sla, limit_name, calendar
FROM scheduler_tasks
WHERE instance_of = ?1 AND removed_at IS NULL AND shard_of IS NULL
ORDER BY instance_key
