-- Take the lock planned for task ?1 (selected by claim_select in the same transaction) and
-- advance its next run. ?2 node, ?3 token, ?4 lock expiry, ?5 next run, ?6 tick served, ?7 now.
UPDATE scheduler_tasks
SET lock_owner = ?2,
    lock_token = ?3,
    lock_expires_at = ?4,
    next_run_at = ?5,
    last_scheduled_at = ?6,
    last_run_at = ?7,
    updated_at = ?7
WHERE name = ?1 AND lock_token IS NULL
