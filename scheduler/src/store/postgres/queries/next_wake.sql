-- When should a node registering the tasks $1 look again? The earliest time something of an
-- unlocked task it may claim becomes due (a tick or retry of an enabled, unpaused task, a manual
-- run of an unpaused one, the end of a pause), and the earliest lock expiry of any task (any
-- node may rescue an expired lock). A locked task needs no wake of its own: its release
-- notifies, its expiry is a lock's.
SELECT now() AS db_now,
       (SELECT min(LEAST(CASE WHEN enabled AND paused_at IS NULL THEN next_run_at END,
                         CASE WHEN enabled AND paused_at IS NULL THEN retry_at END,
                         CASE WHEN paused_at IS NULL THEN manual_at END,
                         pause_until))
        FROM scheduler_tasks
        WHERE lock_token IS NULL AND name = ANY($1)) AS due_at,
       (SELECT min(lock_expires_at) FROM scheduler_tasks
        WHERE lock_token IS NOT NULL) AS expiry_at
