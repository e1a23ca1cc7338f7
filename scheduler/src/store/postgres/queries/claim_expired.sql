-- Locks past their expiry, with the run each protects, for the engine to decide on (rescue or
-- wait). $1 the most locks to look at. The expiry is tested on the locked rows
-- (scheduler_tasks_lock_owner_idx, one row per running run): no index holds lock_expires_at, so
-- that renewals are HOT updates.
-- Each row no other transaction holds is locked until the claim ends (`free`), so a release
-- decided on it never waits and no statement changes it meanwhile; a row another transaction
-- holds is returned `row_busy` and left alone. That holder may be the owner's own write, stuck
-- or frozen mid-statement, with its renewals queued behind it: the owner may be alive.
-- release_locks fences on the token and the expiry.
WITH expired AS (
    SELECT t.name
    FROM scheduler_tasks AS t
    WHERE t.lock_token IS NOT NULL AND t.lock_expires_at < now()
    ORDER BY t.lock_expires_at
    LIMIT $1
), free AS MATERIALIZED (
    SELECT t.name
    FROM scheduler_tasks AS t
    WHERE t.name IN (SELECT name FROM expired)
    FOR NO KEY UPDATE OF t SKIP LOCKED
)
SELECT t.name, t.lock_token, t.lock_owner, t.lock_expires_at, now() AS db_now,
       r.id AS run_id, r.scheduled_at AS run_scheduled_at, r.recovery AS run_recovery,
       r.attempt AS run_attempt, r.trigger AS run_trigger, r.triggered_by AS run_triggered_by,
       r.cancel_requested_by AS run_cancel_requested_by, f.name IS NULL AS row_busy
FROM expired AS e
JOIN scheduler_tasks AS t ON t.name = e.name
LEFT JOIN free AS f ON f.name = e.name
LEFT JOIN scheduler_runs AS r ON r.lock_token = t.lock_token AND r.status = 'running'
ORDER BY t.lock_expires_at
