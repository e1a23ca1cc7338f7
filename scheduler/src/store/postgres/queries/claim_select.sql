-- Lock up to $2 due, unlocked, enabled tasks among the names $1, oldest tick first. Rows another
-- transaction holds (a claim on another node, a reconcile) are skipped, not waited for.
SELECT name, cron, timezone, next_run_at, last_finished_at, now() AS db_now
FROM scheduler_tasks
WHERE enabled
  AND lock_token IS NULL
  AND next_run_at <= now()
  AND name = ANY($1)
ORDER BY next_run_at
LIMIT $2
FOR UPDATE SKIP LOCKED
