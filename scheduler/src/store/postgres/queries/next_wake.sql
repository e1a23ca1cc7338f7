-- When should a node registering the tasks $1 look again? The earliest due time of a claimable
-- task (a locked one only once its lock can expire), or the earliest lock expiry of any task
-- (any node may rescue an expired lock).
SELECT now() AS db_now, min(wake_at) AS wake_at
FROM (
    SELECT CASE WHEN lock_token IS NULL THEN next_run_at
                ELSE GREATEST(next_run_at, lock_expires_at) END AS wake_at
    FROM scheduler_tasks
    WHERE enabled AND next_run_at IS NOT NULL AND name = ANY($1)
    UNION ALL
    SELECT lock_expires_at
    FROM scheduler_tasks
    WHERE lock_token IS NOT NULL
) AS candidates
