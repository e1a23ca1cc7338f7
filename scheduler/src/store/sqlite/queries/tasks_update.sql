-- Update task ?1's schedule and enabled flag in place. Lock columns are never touched, so a
-- running handler finishes undisturbed and no second run can start. A NULL next run ?5 keeps the
-- stored one. ?2 cron, ?3 zone, ?4 enabled, ?6 now.
UPDATE scheduler_tasks
SET cron = ?2,
    timezone = ?3,
    enabled = ?4,
    next_run_at = COALESCE(?5, next_run_at),
    orphaned_since = NULL,
    updated_at = ?6
WHERE name = ?1
