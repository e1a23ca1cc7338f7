-- Release every expired lock. A run still marked running under such a lock is recorded lost, and
-- its tick becomes due again so the task runs once more; a lock without a running run (its
-- holder died between claim and start) is simply released, whatever the next run.
WITH expired AS (
    SELECT name, lock_token, lock_owner
    FROM scheduler_tasks
    WHERE lock_token IS NOT NULL AND lock_expires_at < now()
    FOR UPDATE SKIP LOCKED
), lost AS (
    UPDATE scheduler_runs AS r
    SET status = 'lost',
        finished_at = now(),
        error = 'lock expired: node ' || r.node_id
             || ' stopped renewing it (killed, crashed or cut off from the database)'
    FROM expired AS e
    WHERE r.lock_token = e.lock_token AND r.status = 'running'
    RETURNING r.id, r.task_name, r.scheduled_at
)
UPDATE scheduler_tasks AS t
SET lock_owner = NULL,
    lock_token = NULL,
    lock_expires_at = NULL,
    next_run_at = CASE WHEN l.id IS NULL THEN t.next_run_at
                       ELSE LEAST(t.next_run_at, l.scheduled_at) END,
    last_status = CASE WHEN l.id IS NULL THEN t.last_status ELSE 'lost' END,
    last_error = CASE WHEN l.id IS NULL THEN t.last_error ELSE 'lock expired' END,
    consecutive_failures = t.consecutive_failures + CASE WHEN l.id IS NULL THEN 0 ELSE 1 END,
    updated_at = now()
FROM expired AS e
LEFT JOIN lost AS l ON l.task_name = e.name
WHERE t.name = e.name
RETURNING t.name, e.lock_owner, l.id AS lost_run_id
