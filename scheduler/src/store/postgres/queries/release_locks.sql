-- Apply the engine's rescue decisions: release each lock that still has the decided token and
-- is still expired (its owner did not renew it meanwhile), end its run as decided, and requeue
-- what the engine decided (a tick due again, a retry, a manual run, a backfill's tick:
-- release_requeue.sql, its backfill found by release_backfill.sql). A row another transaction
-- holds at this moment is skipped, never waited for (the holder may be the owner's own write,
-- stuck: see claim_expired_free.sql). Returns the locks released.
-- $1.. parallel arrays: task, token, run id, run status, run error, failure count action
-- ('reset' | 'increment' | 'keep'), requeue kind ('tick' | 'retry' | 'manual' | 'backfill' |
-- NULL), requeue tick, requeue attempt, requeue due time, requeue asker.
WITH decision AS (
    SELECT *
    FROM unnest($1::text[], $2::uuid[], $3::int8[], $4::text[], $5::text[], $6::text[],
                $7::text[], $8::timestamptz[], $9::int4[], $10::timestamptz[], $11::text[])
         AS d(task_name, token, run_id, status, error, failures, rq_kind, rq_tick, rq_attempt,
              rq_at, rq_by)
), free AS MATERIALIZED (
    SELECT t.name
    FROM scheduler_tasks AS t
    WHERE t.name IN (SELECT task_name FROM decision)
    FOR NO KEY UPDATE SKIP LOCKED
), released AS (
    UPDATE scheduler_tasks AS t
    -- @include release_requeue.sql
    FROM (SELECT x.*, true AS last_run, bf.rq_backfill, bf.rq_backfill_due
          FROM decision AS x
          -- @include release_backfill.sql
         ) AS d
    WHERE t.name = d.task_name AND t.lock_token = d.token AND t.lock_expires_at < now()
      AND t.name IN (SELECT name FROM free)
    RETURNING t.name, d.token, d.run_id, d.rq_backfill, d.rq_tick,
              -- A backfill's tick goes back unless the row waits for another backfill by now.
              d.rq_backfill IS NOT NULL
              AND (t.backfill_id IS NULL OR t.backfill_id = d.rq_backfill) AS tick_back
), tick_back AS (
    -- A backfill's tick handed back is pending again (see finish_runs.sql).
    UPDATE scheduler_backfill_ticks AS bt
    SET run_id = NULL
    FROM released AS rl
    WHERE rl.tick_back AND bt.backfill_id = rl.rq_backfill AND bt.row_name = rl.name
      AND bt.tick = rl.rq_tick AND bt.run_id = rl.run_id
), ended AS (
    UPDATE scheduler_runs AS r
    SET status = d.status, finished_at = clock_timestamp(), error = d.error
    FROM released AS rl
    JOIN decision AS d ON d.task_name = rl.name
    WHERE r.id = rl.run_id AND r.lock_token = rl.token AND r.status = 'running'
    RETURNING r.id
)
SELECT name FROM released
