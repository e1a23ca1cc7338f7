-- Apply the engine's rescue decisions: release each lock that still has the decided token and
-- is still expired (its owner did not renew it meanwhile), end its run as decided, and requeue
-- what the engine decided (a tick due again, a retry, a manual run). Returns the locks released.
-- $1.. parallel arrays: task, token, run id, run status, run error, failure count action
-- ('reset' | 'increment' | 'keep'), requeue kind ('tick' | 'retry' | 'manual' | NULL), requeue
-- tick, requeue attempt, requeue due time, requeue asker.
WITH decision AS (
    SELECT *
    FROM unnest($1::text[], $2::uuid[], $3::int8[], $4::text[], $5::text[], $6::text[],
                $7::text[], $8::timestamptz[], $9::int4[], $10::timestamptz[], $11::text[])
         AS d(name, token, run_id, run_status, run_error, failures, rq_kind, rq_tick,
              rq_attempt, rq_at, rq_by)
), released AS (
    UPDATE scheduler_tasks AS t
    SET lock_owner = NULL,
        lock_token = NULL,
        lock_expires_at = NULL,
        next_run_at = CASE WHEN d.rq_kind = 'tick' THEN LEAST(t.next_run_at, d.rq_tick)
                           ELSE t.next_run_at END,
        retry_at = CASE WHEN d.rq_kind = 'retry' THEN d.rq_at ELSE t.retry_at END,
        retry_tick = CASE WHEN d.rq_kind = 'retry' THEN d.rq_tick ELSE t.retry_tick END,
        retry_attempt = CASE WHEN d.rq_kind = 'retry' THEN d.rq_attempt ELSE t.retry_attempt END,
        manual_at = CASE WHEN d.rq_kind = 'manual' THEN d.rq_at ELSE t.manual_at END,
        manual_by = CASE WHEN d.rq_kind = 'manual' THEN d.rq_by ELSE t.manual_by END,
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
