-- Apply the engine's rescue decisions: release each lock that still has the decided token and
-- is still expired (its owner did not renew it meanwhile), end its run as decided, and make the
-- decided tick due again. Returns the locks released.
-- $1.. parallel arrays: task, token, run id, run status, run error, rerun tick, failure count
-- action ('reset' | 'increment' | 'keep').
WITH decision AS (
    SELECT *
    FROM unnest($1::text[], $2::uuid[], $3::int8[], $4::text[], $5::text[], $6::timestamptz[],
                $7::text[])
         AS d(name, token, run_id, run_status, run_error, rerun_at, failures)
), released AS (
    UPDATE scheduler_tasks AS t
    SET lock_owner = NULL,
        lock_token = NULL,
        lock_expires_at = NULL,
        next_run_at = CASE WHEN d.rerun_at IS NULL THEN t.next_run_at
                           ELSE LEAST(t.next_run_at, d.rerun_at) END,
        last_finished_at = CASE WHEN d.run_id IS NULL THEN t.last_finished_at
                                ELSE clock_timestamp() END,
        last_status = COALESCE(d.run_status, t.last_status),
        last_error = CASE WHEN d.run_id IS NULL THEN t.last_error ELSE d.run_error END,
        consecutive_failures = CASE d.failures WHEN 'reset' THEN 0
                                               WHEN 'increment' THEN t.consecutive_failures + 1
                                               ELSE t.consecutive_failures END,
        updated_at = now()
    FROM decision AS d
    WHERE t.name = d.name AND t.lock_token = d.token AND t.lock_expires_at < now()
    RETURNING t.name, d.token, d.run_id
), ended AS (
    UPDATE scheduler_runs AS r
    SET status = d.run_status, finished_at = clock_timestamp(), error = d.run_error
    FROM released AS rl
    JOIN decision AS d ON d.name = rl.name
    WHERE r.id = rl.run_id AND r.lock_token = rl.token AND r.status = 'running'
    RETURNING r.id
)
SELECT name FROM released
