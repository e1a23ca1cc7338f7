-- Apply the engine's rescue decisions: release each lock that still has the decided token and
-- is still expired (its owner did not renew it meanwhile), end its run as decided, and requeue
-- what the engine decided (a tick due again, a retry, a manual run: release_requeue.sql).
-- Returns the locks released.
-- $1.. parallel arrays: task, token, run id, run status, run error, failure count action
-- ('reset' | 'increment' | 'keep'), requeue kind ('tick' | 'retry' | 'manual' | NULL), requeue
-- tick, requeue attempt, requeue due time, requeue asker.
WITH decision AS (
    SELECT *
    FROM unnest($1::text[], $2::uuid[], $3::int8[], $4::text[], $5::text[], $6::text[],
                $7::text[], $8::timestamptz[], $9::int4[], $10::timestamptz[], $11::text[])
         AS d(name, token, run_id, status, error, failures, rq_kind, rq_tick, rq_attempt,
              rq_at, rq_by)
), released AS (
    UPDATE scheduler_tasks AS t
    -- @include release_requeue.sql
    FROM decision AS d
    WHERE t.name = d.name AND t.lock_token = d.token AND t.lock_expires_at < now()
    RETURNING t.name, d.token, d.run_id
), ended AS (
    UPDATE scheduler_runs AS r
    SET status = d.status, finished_at = clock_timestamp(), error = d.error
    FROM released AS rl
    JOIN decision AS d ON d.name = rl.name
    WHERE r.id = rl.run_id AND r.lock_token = rl.token AND r.status = 'running'
    RETURNING r.id
)
SELECT name FROM released
