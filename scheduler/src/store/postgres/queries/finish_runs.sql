-- Record the end of a batch of runs and release each lock that is still ours (token fence). A
-- run with a hand-over tick makes that tick due again at once, for another node to take over.
-- Wakes the other nodes once per batch. Returns the tasks whose lock was still held.
-- $1.. parallel arrays: run id, task, token, status, error, hand-over tick; $7 notify channel.
WITH outcome AS (
    SELECT *
    FROM unnest($1::int8[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::timestamptz[])
         AS o(run_id, task_name, token, status, error, hand_over)
), run AS (
    UPDATE scheduler_runs AS r
    SET status = o.status, finished_at = clock_timestamp(), error = o.error
    FROM outcome AS o
    WHERE r.id = o.run_id AND r.status = 'running'
    RETURNING r.id
), released AS (
    UPDATE scheduler_tasks AS t
    SET lock_owner = NULL,
        lock_token = NULL,
        lock_expires_at = NULL,
        next_run_at = CASE WHEN o.hand_over IS NULL THEN t.next_run_at
                           ELSE LEAST(t.next_run_at, o.hand_over) END,
        last_finished_at = clock_timestamp(),
        last_status = o.status,
        last_error = o.error,
        consecutive_failures = CASE WHEN o.status = 'succeeded' THEN 0
                                    ELSE t.consecutive_failures + 1 END,
        updated_at = now()
    FROM outcome AS o
    WHERE t.name = o.task_name AND t.lock_token = o.token
    RETURNING t.name
)
SELECT name,
       CASE WHEN row_number() OVER () = 1 THEN pg_notify($7, 'released')::text END AS notified
FROM released
