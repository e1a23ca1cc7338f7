-- Release task ?1's lock if it is still ours (token ?2), after its run ended with status ?4 and
-- error ?5 at ?7 (now). A hand-over tick ?3 becomes due again at once (the earlier of it and the
-- stored next run; a missing next run counts as later, like PostgreSQL's LEAST). ?6 failure
-- count action ('reset' | 'increment' | 'keep'). The rows changed say whether it was held.
UPDATE scheduler_tasks
SET lock_owner = NULL,
    lock_token = NULL,
    lock_expires_at = NULL,
    next_run_at = CASE WHEN ?3 IS NULL THEN next_run_at
                       WHEN next_run_at IS NULL OR ?3 < next_run_at THEN ?3
                       ELSE next_run_at END,
    last_finished_at = ?7,
    last_status = ?4,
    last_error = ?5,
    consecutive_failures = CASE ?6 WHEN 'reset' THEN 0
                                   WHEN 'increment' THEN consecutive_failures + 1
                                   ELSE consecutive_failures END,
    updated_at = ?7
WHERE name = ?1 AND lock_token = ?2
