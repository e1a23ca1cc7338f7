-- Enabled, unpaused tasks without an open missed-run incident whose next run is before ?1,
-- oldest first (then by name), at most ?2, with the store's clock ?3 (how late they are is
-- measured on it).
SELECT name, cron, timezone, calendar, next_run_at, last_run_at, owners, labels, sla, ?3 AS checked_at
FROM scheduler_tasks
WHERE enabled = 1 AND paused_at IS NULL AND missed_since IS NULL AND next_run_at < ?1
  AND (node_pin IS NULL OR node_pin = '')
ORDER BY next_run_at, name
LIMIT ?2
