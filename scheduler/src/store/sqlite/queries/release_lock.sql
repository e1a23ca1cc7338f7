-- Release task ?1's lock if it still has the token ?2 (and, when ?13 is true, only if it expired
-- before ?12, now: a rescue's fence against a renewal), record on the row how its run ended, and
-- requeue what the engine decided. The one place a released lock's row is written: a rescue
-- (claim) and the end of a run (finish_runs) both release through it. Returns the task when
-- released.
-- ?3 the run that ended, if any, ?4 its status (NULL: no run ended, or one that is not the
-- row's last run, and the row's last run is left as it was), ?14 false when the run that ended
-- was handed back before it started (the row's last start goes back to the one its claim
-- replaced, `prior_run_at`), ?5 its error, ?6 failure count action ('reset' | 'increment' |
-- 'keep'); ?7 requeue kind ('tick' | 'retry' | 'manual' | 'backfill' | NULL), ?8 requeue tick,
-- ?9 requeue attempt, ?10 requeue due time, ?11 requeue asker. A requeued tick becomes the
-- earlier of it and the stored next run (a missing next run counts as later, like PostgreSQL's
-- LEAST); when it is, it is its own start (no jitter shifts a tick run again: `next_tick` is
-- cleared). A backfill's tick ?8 handed back by run ?3 makes the row's backfill due again at
-- once, unless it was cancelled or the row waits for another backfill by now (the tick itself
-- goes back with backfill_tick_back.sql).
UPDATE scheduler_tasks
SET lock_owner = NULL,
    lock_token = NULL,
    lock_expires_at = NULL,
    next_run_at = CASE WHEN ?7 = 'tick' AND (next_run_at IS NULL OR ?8 < next_run_at) THEN ?8
                       ELSE next_run_at END,
    next_tick = CASE WHEN ?7 = 'tick' AND (next_run_at IS NULL OR ?8 < next_run_at) THEN NULL
                     ELSE next_tick END,
    retry_at = CASE WHEN ?7 = 'retry' THEN ?10 ELSE retry_at END,
    retry_tick = CASE WHEN ?7 = 'retry' THEN ?8 ELSE retry_tick END,
    retry_attempt = CASE WHEN ?7 = 'retry' THEN ?9 ELSE retry_attempt END,
    backfill_id = CASE WHEN ?7 = 'backfill' AND backfill_id IS NULL THEN
                           (SELECT bt.backfill_id FROM scheduler_backfill_ticks AS bt
                            JOIN scheduler_backfills AS b ON b.id = bt.backfill_id
                            WHERE bt.run_id = ?3 AND bt.row_name = ?1 AND bt.tick = ?8
                              AND b.cancelled_at IS NULL)
                       ELSE backfill_id END,
    backfill_at = CASE WHEN ?7 = 'backfill' THEN
                           CASE WHEN EXISTS (SELECT 1 FROM scheduler_backfill_ticks AS bt
                                             JOIN scheduler_backfills AS b ON b.id = bt.backfill_id
                                             WHERE bt.run_id = ?3 AND bt.row_name = ?1
                                               AND bt.tick = ?8 AND b.cancelled_at IS NULL
                                               AND (scheduler_tasks.backfill_id IS NULL
                                                    OR scheduler_tasks.backfill_id = bt.backfill_id))
                                THEN ?12 ELSE backfill_at END
                       ELSE backfill_at END,
    manual_at = CASE WHEN ?7 = 'manual' THEN ?10 ELSE manual_at END,
    manual_by = CASE WHEN ?7 = 'manual' THEN ?11 ELSE manual_by END,
    -- A manual run requeued is the same request: with the arguments its run was given.
    manual_args = CASE WHEN ?7 = 'manual'
                       THEN (SELECT r.args_override FROM scheduler_runs AS r WHERE r.id = ?3)
                       ELSE manual_args END,
    last_run_at = CASE WHEN ?14 THEN last_run_at ELSE prior_run_at END,
    last_finished_at = CASE WHEN ?4 IS NULL THEN last_finished_at ELSE ?12 END,
    last_status = COALESCE(?4, last_status),
    last_error = CASE WHEN ?4 IS NULL THEN last_error ELSE ?5 END,
    consecutive_failures = CASE ?6 WHEN 'reset' THEN 0
                                   WHEN 'increment' THEN consecutive_failures + 1
                                   ELSE consecutive_failures END,
    updated_at = ?12
WHERE name = ?1 AND lock_token = ?2 AND (NOT ?13 OR lock_expires_at < ?12)
RETURNING name
