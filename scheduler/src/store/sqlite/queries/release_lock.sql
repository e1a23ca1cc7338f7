-- Apply one rescue decision: release task ?1's lock if it still has the token ?2 and is still
-- expired at ?8 (now), and make the decided tick ?5 due again (the earlier of it and the stored
-- next run; a missing next run counts as later, like PostgreSQL's LEAST). Returns the task when
-- released. ?3 the run ended (NULL: none), ?4 its status, ?6 its error, ?7 failure count action
-- ('reset' | 'increment' | 'keep').
UPDATE scheduler_tasks
SET lock_owner = NULL,
    lock_token = NULL,
    lock_expires_at = NULL,
    next_run_at = CASE WHEN ?5 IS NULL THEN next_run_at
                       WHEN next_run_at IS NULL OR ?5 < next_run_at THEN ?5
                       ELSE next_run_at END,
    last_finished_at = CASE WHEN ?3 IS NULL THEN last_finished_at ELSE ?8 END,
    last_status = COALESCE(?4, last_status),
    last_error = CASE WHEN ?3 IS NULL THEN last_error ELSE ?6 END,
    consecutive_failures = CASE ?7 WHEN 'reset' THEN 0
                                   WHEN 'increment' THEN consecutive_failures + 1
                                   ELSE consecutive_failures END,
    updated_at = ?8
WHERE name = ?1 AND lock_token = ?2 AND lock_expires_at < ?8
RETURNING name
