-- When should node ?2 registering the tasks ?1 (a JSON array of names) look again? The earliest
-- time something of an unlocked task it may claim becomes due (a tick, retry or backfill tick of an
-- enabled, unpaused task, a manual run of an unpaused one, the end of a pause), and the earliest lock
-- expiry of any task (any node may rescue an expired lock). A locked task needs no wake of its
-- own: its release wakes the listeners, its expiry is a lock's. (SQLite's min(a, b, ...) is NULL
-- when any argument is; the aggregate min over one column per candidate ignores NULLs, as
-- PostgreSQL's LEAST does.)
WITH mine AS (
    SELECT enabled = 1 AND paused_at IS NULL AS runnable, paused_at IS NULL AS unpaused,
           next_run_at, retry_at, manual_at, pause_until, backfill_at
    FROM scheduler_tasks
    WHERE lock_token IS NULL
      AND (name IN (SELECT value FROM json_each(?1)) OR shard_of IN (SELECT value FROM json_each(?1))
           OR instance_of IN (SELECT value FROM json_each(?1)))
      AND (node_pin IS NULL OR node_pin = '' OR node_pin = ?2)
)
SELECT (SELECT min(at) FROM (
            SELECT CASE WHEN runnable THEN next_run_at END AS at FROM mine
            UNION ALL SELECT CASE WHEN runnable THEN retry_at END FROM mine
            UNION ALL SELECT CASE WHEN unpaused THEN manual_at END FROM mine
            UNION ALL SELECT pause_until FROM mine
            UNION ALL SELECT CASE WHEN runnable THEN backfill_at END FROM mine)) AS due_at,
       (SELECT min(lock_expires_at) FROM scheduler_tasks
        WHERE lock_token IS NOT NULL) AS expiry_at
