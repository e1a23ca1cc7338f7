-- Record a run's end and release its lock if it is still ours (token fence). With $7 set, the
-- served tick becomes due again at once, for another node to take over. Wakes the other nodes.
-- $1 run id, $2 task, $3 token, $4 status, $5 error, $6 notify channel, $7 hand-over tick.
WITH run AS (
    UPDATE scheduler_runs
    SET status = $4, finished_at = clock_timestamp(), error = $5
    WHERE id = $1 AND status = 'running'
    RETURNING id
)
UPDATE scheduler_tasks
SET lock_owner = NULL,
    lock_token = NULL,
    lock_expires_at = NULL,
    next_run_at = CASE WHEN $7::timestamptz IS NULL THEN next_run_at
                       ELSE LEAST(next_run_at, $7::timestamptz) END,
    last_finished_at = clock_timestamp(),
    last_status = $4,
    last_error = $5,
    consecutive_failures = CASE WHEN $4 = 'succeeded' THEN 0 ELSE consecutive_failures + 1 END,
    updated_at = now()
WHERE name = $2 AND lock_token = $3
RETURNING name, pg_notify($6, 'released:' || name)::text AS notified, (SELECT count(*) FROM run) AS run_rows
