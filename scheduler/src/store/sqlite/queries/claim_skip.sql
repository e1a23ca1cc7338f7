-- Apply the engine's skip decision on task ?1 (selected by claim_select in the same
-- transaction): move the schedule, drop the pending retry, end an expired pause. The skipped
-- ticks are recorded by skips_insert in the same transaction. ?2 set the next run?, ?3 next run,
-- ?4 clear the retry?, ?5 clear the pause?, ?6 now, ?7 clear the manual run? (a broadcast task's
-- own row, which never runs it), ?8 the next run's tick when jitter shifted its start. A row
-- waiting for its limit waits no more.
UPDATE scheduler_tasks
SET next_run_at = CASE WHEN ?2 THEN ?3 ELSE next_run_at END,
    next_tick = CASE WHEN ?2 THEN ?8 ELSE next_tick END,
    retry_at = CASE WHEN ?4 THEN NULL ELSE retry_at END,
    retry_tick = CASE WHEN ?4 THEN NULL ELSE retry_tick END,
    retry_attempt = CASE WHEN ?4 THEN NULL ELSE retry_attempt END,
    paused_at = CASE WHEN ?5 THEN NULL ELSE paused_at END,
    paused_by = CASE WHEN ?5 THEN NULL ELSE paused_by END,
    pause_reason = CASE WHEN ?5 THEN NULL ELSE pause_reason END,
    pause_until = CASE WHEN ?5 THEN NULL ELSE pause_until END,
    manual_at = CASE WHEN ?7 THEN NULL ELSE manual_at END,
    manual_by = CASE WHEN ?7 THEN NULL ELSE manual_by END,
    limit_waiting_since = NULL,
    updated_at = ?6
WHERE name = ?1 AND lock_token IS NULL
