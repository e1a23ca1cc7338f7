-- Up to ?3 due (at ?1, now), unlocked, enabled tasks among the names ?2 (a JSON array), oldest
-- tick first. No row locking is needed: the claim's IMMEDIATE transaction holds the database's
-- write lock, so no other writer can interleave.
SELECT name, cron, timezone, next_run_at, last_finished_at
FROM scheduler_tasks
WHERE enabled = 1
  AND lock_token IS NULL
  AND next_run_at <= ?1
  AND name IN (SELECT value FROM json_each(?2))
ORDER BY next_run_at, name
LIMIT ?3
