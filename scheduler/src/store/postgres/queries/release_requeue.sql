-- The release of a lock and the requeue the engine decided, written once: spliced into every
-- statement that releases a lock (release_locks.sql, a rescue; finish_runs.sql, the end of a
-- run) where it says `-- @include release_requeue.sql`, as the SET and FROM of their
-- `UPDATE scheduler_tasks AS t`. From the decision row `d`: run_id (the run that ended, if
-- any), status (how it ended; NULL: no run ended, or one that is not the row's last run, and the
-- row's last run is left as it was), last_run (false: the run that ended was handed back before
-- it started, and the row's last start goes back to the one its claim replaced, `prior_run_at`),
-- error, failures ('reset' | 'increment' | 'keep'), rq_kind ('tick' | 'retry' | 'manual' |
-- 'backfill' | NULL), rq_tick, rq_attempt, rq_at, rq_by, rq_backfill (for 'backfill': the
-- backfill whose tick `rq_tick` the run served, else NULL), rq_backfill_due (whether that
-- backfill was not cancelled). A requeued tick becomes the earlier of it and the stored next
-- run (when it is, it is its own start: no jitter shifts a tick run again, and `next_tick` is
-- cleared). A backfill's tick handed back makes the row's backfill due again at once, unless it
-- was cancelled or the row waits for another backfill by now (the includer finds rq_backfill
-- and rq_backfill_due with release_backfill.sql, and puts the tick itself back).
SET lock_owner = NULL,
    lock_token = NULL,
    lock_expires_at = NULL,
    next_run_at = CASE WHEN d.rq_kind = 'tick' THEN LEAST(t.next_run_at, d.rq_tick)
                       ELSE t.next_run_at END,
    next_tick = CASE WHEN d.rq_kind = 'tick'
                          AND (t.next_run_at IS NULL OR d.rq_tick < t.next_run_at) THEN NULL
                     ELSE t.next_tick END,
    retry_at = CASE WHEN d.rq_kind = 'retry' THEN d.rq_at ELSE t.retry_at END,
    retry_tick = CASE WHEN d.rq_kind = 'retry' THEN d.rq_tick ELSE t.retry_tick END,
    retry_attempt = CASE WHEN d.rq_kind = 'retry' THEN d.rq_attempt ELSE t.retry_attempt END,
    backfill_id = CASE WHEN d.rq_backfill_due AND t.backfill_id IS NULL THEN d.rq_backfill
                       ELSE t.backfill_id END,
    backfill_at = CASE WHEN d.rq_backfill_due
                            AND (t.backfill_id IS NULL OR t.backfill_id = d.rq_backfill) THEN now()
                       ELSE t.backfill_at END,
    manual_at = CASE WHEN d.rq_kind = 'manual' THEN d.rq_at ELSE t.manual_at END,
    manual_by = CASE WHEN d.rq_kind = 'manual' THEN d.rq_by ELSE t.manual_by END,
    -- A manual run requeued is the same request: with the arguments its run was given.
    manual_args = CASE WHEN d.rq_kind = 'manual'
                       THEN (SELECT r.args_override FROM scheduler_runs AS r WHERE r.id = d.run_id)
                       ELSE t.manual_args END,
    last_run_at = CASE WHEN d.last_run THEN t.last_run_at ELSE t.prior_run_at END,
    last_finished_at = CASE WHEN d.status IS NULL THEN t.last_finished_at
                            ELSE clock_timestamp() END,
    last_status = COALESCE(d.status, t.last_status),
    last_error = CASE WHEN d.status IS NULL THEN t.last_error ELSE d.error END,
    consecutive_failures = CASE d.failures WHEN 'reset' THEN 0
                                           WHEN 'increment' THEN t.consecutive_failures + 1
                                           ELSE t.consecutive_failures END,
    updated_at = now()
