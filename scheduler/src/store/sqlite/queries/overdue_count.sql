-- How many enabled, unpaused tasks with no missed-run incident open have a next run before ?1
-- (a hint for the heartbeat to look closer).
SELECT count(*) FROM scheduler_tasks
WHERE enabled = 1 AND paused_at IS NULL AND missed_since IS NULL AND next_run_at < ?1
  AND (node_pin IS NULL OR node_pin = '')
