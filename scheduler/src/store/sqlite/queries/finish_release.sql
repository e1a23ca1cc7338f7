-- Release task ?1's lock if it is still ours (token ?2), after its run ended with status ?3 and
-- error ?4 at ?11 (now), and requeue what the engine decided. ?5 failure count action ('reset' |
-- 'increment' | 'keep'); ?6 requeue kind ('tick' | 'retry' | 'manual' | NULL), ?7 requeue tick,
-- ?8 requeue attempt, ?9 requeue due time, ?10 requeue asker. A requeued tick becomes the
-- earlier of it and the stored next run (a missing next run counts as later, like PostgreSQL's
-- LEAST). The rows changed say whether the lock was held.
UPDATE scheduler_tasks
SET lock_owner = NULL,
    lock_token = NULL,
    lock_expires_at = NULL,
    next_run_at = CASE WHEN ?6 = 'tick' AND (next_run_at IS NULL OR ?7 < next_run_at) THEN ?7
                       ELSE next_run_at END,
    retry_at = CASE WHEN ?6 = 'retry' THEN ?9 ELSE retry_at END,
    retry_tick = CASE WHEN ?6 = 'retry' THEN ?7 ELSE retry_tick END,
    retry_attempt = CASE WHEN ?6 = 'retry' THEN ?8 ELSE retry_attempt END,
    manual_at = CASE WHEN ?6 = 'manual' THEN ?9 ELSE manual_at END,
    manual_by = CASE WHEN ?6 = 'manual' THEN ?10 ELSE manual_by END,
    last_finished_at = ?11,
    last_status = ?3,
    last_error = ?4,
    consecutive_failures = CASE ?5 WHEN 'reset' THEN 0
                                   WHEN 'increment' THEN consecutive_failures + 1
                                   ELSE consecutive_failures END,
    updated_at = ?11
WHERE name = ?1 AND lock_token = ?2
