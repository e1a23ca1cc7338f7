-- When should a node registering the tasks ?1 (a JSON array of names) look again? The earliest
-- due time of a claimable, unlocked task, and the earliest lock expiry of any task (any node may
-- rescue an expired lock). A locked task needs no wake of its own: its release wakes the
-- listeners, its expiry is a lock's.
SELECT (SELECT min(next_run_at) FROM scheduler_tasks
        WHERE enabled = 1 AND lock_token IS NULL
          AND name IN (SELECT value FROM json_each(?1))) AS due_at,
       (SELECT min(lock_expires_at) FROM scheduler_tasks
        WHERE lock_token IS NOT NULL) AS expiry_at
