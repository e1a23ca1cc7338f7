SELECT name, cron, timezone, calendar, enabled, next_run_at, last_scheduled_at, orphaned_since,
       disabled_at, paused_at IS NOT NULL AS paused, shards, node_pin, limit_name,
       removed_at IS NOT NULL AS removed, args, instance_source, jitter_ms, owners, labels, sla
FROM scheduler_tasks
ORDER BY name
