-- The backfill of a backfill's tick handed back, found once: spliced into every statement that
-- releases a lock (release_locks.sql, finish_runs.sql) where it says
-- `-- @include release_backfill.sql`, as a join on their decision row `x` (run_id, task_name,
-- rq_kind, rq_tick) in the FROM of their `UPDATE scheduler_tasks AS t`, for
-- release_requeue.sql: rq_backfill (for 'backfill': the backfill whose tick `rq_tick` run
-- `run_id` served on row `task_name`, else NULL) and rq_backfill_due (whether that backfill
-- was not cancelled). Read only for 'backfill', which is rare: no index serves a tick by its
-- run. The LIMIT keeps the subquery from being pulled up into the join, so the test of
-- `rq_kind`, on the decision row alone, gates it (a one-time filter per row: the other rows
-- read nothing).
LEFT JOIN LATERAL (
    SELECT bt.backfill_id AS rq_backfill, b.cancelled_at IS NULL AS rq_backfill_due
    FROM scheduler_backfill_ticks AS bt
    JOIN scheduler_backfills AS b ON b.id = bt.backfill_id
    WHERE x.rq_kind = 'backfill'
      AND bt.run_id = x.run_id AND bt.row_name = x.task_name AND bt.tick = x.rq_tick
    LIMIT 1
) AS bf ON true
