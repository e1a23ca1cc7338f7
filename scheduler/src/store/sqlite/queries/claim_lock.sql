-- Take the lock planned for task ?1 (selected by claim_select in the same transaction), move its
-- schedule as planned, clear what the run serves (its retry, its manual request, an open
-- missed-run incident), and make the run's start the row's last start (keeping the one it
-- replaces for a run handed back before it started: release_lock.sql). ?2 node, ?3 token, ?4
-- lock expiry, ?5 set the next run?, ?6 next run, ?7 trigger, ?8 tick served, ?9 clear the
-- retry?, ?10 now, ?11 the next run's tick when jitter shifted its start (see
-- crate::ticks::jitter), ?12 when the run is due to start (its tick, or its jittered start: a
-- run claimed ahead runs last then), ?13 the limit the lock holds (crate::limits; NULL: none).
-- Returns the task's fence, moved on by one (the run's fencing token), if the lock was taken.
UPDATE scheduler_tasks
SET lock_owner = ?2,
    lock_token = ?3,
    lock_expires_at = ?4,
    next_run_at = CASE WHEN ?5 THEN ?6 ELSE next_run_at END,
    next_tick = CASE WHEN ?5 THEN ?11 ELSE next_tick END,
    last_scheduled_at = CASE WHEN ?7 = 'schedule' THEN ?8 ELSE last_scheduled_at END,
    retry_at = CASE WHEN ?9 THEN NULL ELSE retry_at END,
    retry_tick = CASE WHEN ?9 THEN NULL ELSE retry_tick END,
    retry_attempt = CASE WHEN ?9 THEN NULL ELSE retry_attempt END,
    manual_at = CASE WHEN ?7 = 'manual' THEN NULL ELSE manual_at END,
    manual_by = CASE WHEN ?7 = 'manual' THEN NULL ELSE manual_by END,
    manual_args = CASE WHEN ?7 = 'manual' THEN NULL ELSE manual_args END,
    missed_since = NULL,
    limit_held = ?13,
    limit_waiting_since = NULL,
    fence = fence + 1,
    prior_run_at = last_run_at,
    last_run_at = max(?10, ?12),
    updated_at = ?10
WHERE name = ?1 AND lock_token IS NULL
RETURNING fence
