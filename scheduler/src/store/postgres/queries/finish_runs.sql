-- Record the end of a batch of runs as the engine decided it, and for each lock that is still
-- ours (token fence) release it and requeue what the engine decided (a tick due again, a retry,
-- a manual run, a backfill's tick handed back before it started: release_requeue.sql, its
-- backfill found by release_backfill.sql). A run another node already marked `lost` still gets
-- its real outcome.
-- Wakes the other nodes (one NOTIFY per batch) only when a released task becomes due sooner than
-- every other unlocked task due later than now: only then may they sleep past it. (The engine
-- that finished the batch wakes itself, so it always sees its released tasks; another node
-- learns of them when it wakes for the earlier task, or at its poll.) A task due now or in the
-- past (a tick run again, a retry, a manual run, a handed-over run) always notifies. Only
-- `next_run_at` counts for the others' wake time: leaving out retries and manual runs can only
-- make the minimum later, so it may notify more, never less. A released run that held a limit
-- shared by tasks always notifies: ticks on other nodes may wait for its share.
-- $1.. parallel arrays: run id, task, token, status, error, failure count action, ticks
-- collapsed, requeue kind ('tick' | 'retry' | 'manual' | 'backfill' | NULL), requeue tick, requeue attempt,
-- requeue due time, requeue asker; $13 notify channel; $14 when each handler started (NULL:
-- never; it replaces the start the claim planned); $15 whether each run becomes its task row's
-- last run (false: a run handed back before it started, the row's last run is left as it was,
-- its start as before the claim).
-- Returns each run written and whether its lock was held.
WITH outcome AS (
    SELECT *
    FROM unnest($1::int8[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[],
                $7::int4[], $8::text[], $9::timestamptz[], $10::int4[], $11::timestamptz[],
                $12::text[], $14::timestamptz[], $15::bool[])
         AS o(run_id, task_name, token, status, error, failures, collapsed, rq_kind, rq_tick,
              rq_attempt, rq_at, rq_by, started_at, last_run)
), run AS (
    UPDATE scheduler_runs AS r
    SET status = o.status,
        started_at = o.started_at,
        finished_at = clock_timestamp(),
        error = CASE WHEN r.status = 'lost'
                     THEN concat_ws(' ', o.error, '(recorded after another node released the lock)')
                     ELSE o.error END,
        ticks_collapsed = o.collapsed
    FROM outcome AS o
    -- The status test is written so that no index on status can drive the join: after an
    -- ANALYZE taken between bursts, the planner expected one running run and ten outcomes,
    -- looped over the running runs for each outcome, and a batch of 1,000 took 2.9 s
    -- (10,000,000 join tests) instead of 1,000 primary-key lookups.
    WHERE r.id = o.run_id AND r.lock_token = o.token
      AND (r.status || '') IN ('running', 'lost')
    RETURNING r.id
), released AS (
    UPDATE scheduler_tasks AS t
    -- @include release_requeue.sql
    -- (A run that is not the row's last run is given to it without a status.)
    FROM (SELECT run_id, task_name, token, CASE WHEN last_run THEN status END AS status,
                 last_run, error, failures, rq_kind, rq_tick, rq_attempt, rq_at, rq_by,
                 bf.rq_backfill, bf.rq_backfill_due
          FROM outcome AS x
          -- @include release_backfill.sql
         ) AS d
    WHERE t.name = d.task_name AND t.lock_token = d.token
    RETURNING d.run_id, t.limit_held IS NOT NULL AS held_limit,
              CASE WHEN t.paused_at IS NOT NULL THEN t.pause_until
                   ELSE LEAST(CASE WHEN t.enabled THEN t.next_run_at END,
                              CASE WHEN t.enabled THEN t.retry_at END, t.manual_at,
                              CASE WHEN t.enabled THEN t.backfill_at END) END AS due_at,
              -- A backfill's tick goes back unless the row waits for another backfill by now.
              d.rq_backfill IS NOT NULL
              AND (t.backfill_id IS NULL OR t.backfill_id = d.rq_backfill) AS tick_back,
              d.rq_backfill, d.task_name, d.rq_tick
), tick_back AS (
    -- A backfill's tick handed back before its run started is pending again (claimed later as
    -- if it had never been); with its backfill cancelled, it is one the cancel left unrun.
    UPDATE scheduler_backfill_ticks AS bt
    SET run_id = NULL
    FROM released AS rl
    WHERE rl.tick_back AND bt.backfill_id = rl.rq_backfill AND bt.row_name = rl.task_name
      AND bt.tick = rl.rq_tick AND bt.run_id = rl.run_id
), sooner AS MATERIALIZED (
    -- Two one-row aggregates, each computed once (a join would rescan the second per released
    -- row). In the statement's snapshot the rows released above are still locked.
    SELECT 1
    FROM (SELECT min(due_at) AS due_at FROM released) AS mine,
         (SELECT min(next_run_at) AS due_at FROM scheduler_tasks
          WHERE enabled AND next_run_at > now() AND paused_at IS NULL
            AND lock_token IS NULL) AS others
    WHERE mine.due_at < others.due_at OR (mine.due_at IS NOT NULL AND others.due_at IS NULL)
), notified AS (
    SELECT pg_notify($13, 'released') FROM sooner
), share_back AS (
    -- A share of a limit shared by tasks came back (crate::limits): the nodes whose ticks
    -- wait for it look again now, not at their next retry.
    SELECT pg_notify($13, 'released') WHERE EXISTS (SELECT 1 FROM released WHERE held_limit)
)
SELECT o.run_id, (rl.run_id IS NOT NULL) AS lock_held,
       (SELECT count(*) FROM notified) + (SELECT count(*) FROM share_back) AS notified
FROM outcome AS o
LEFT JOIN released AS rl ON rl.run_id = o.run_id
