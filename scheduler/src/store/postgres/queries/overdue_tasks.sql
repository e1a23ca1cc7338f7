-- Enabled, unpaused tasks without an open missed-run incident whose next run is more than $1 ms
-- old (a broadcast task's node rows aside: a dead node's row is overdue by design), oldest first, at most $2, with the store's clock (how late they are is measured on it).
SELECT name, cron, timezone, calendar, next_run_at, last_run_at, owners, labels, sla, now() AS checked_at
FROM scheduler_tasks
WHERE enabled AND paused_at IS NULL AND missed_since IS NULL AND (node_pin IS NULL OR node_pin = '')
  AND next_run_at < now() - $1::int8 * interval '1 millisecond'
ORDER BY next_run_at
LIMIT $2
