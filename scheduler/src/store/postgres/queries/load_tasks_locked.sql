-- Every task row, locked for the reconcile planned on them (claims skip locked rows). The clock
-- is the statement's, not the transaction's start: the transaction may have waited for the
-- config-state lock.
SELECT name, cron, timezone, calendar, enabled, next_run_at, last_scheduled_at, orphaned_since,
       disabled_at, paused_at IS NOT NULL AS paused, shards, node_pin, limit_name,
       removed_at IS NOT NULL AS removed, args, instance_source, jitter_ms, owners, labels, sla,
       clock_timestamp() AS db_now
FROM scheduler_tasks
ORDER BY name
FOR UPDATE
