-- Lock up to $2 due, unlocked, enabled tasks among the names $1, oldest tick first. Rows another
-- node is claiming right now are skipped, not waited for.
SELECT name, cron, timezone, next_run_at, now() AS db_now
FROM scheduler_tasks
WHERE enabled
  AND lock_token IS NULL
  AND next_run_at <= now()
  AND name = ANY($1)
ORDER BY next_run_at
LIMIT $2
FOR UPDATE SKIP LOCKED
