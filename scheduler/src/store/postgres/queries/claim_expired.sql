-- Locks past their expiry, with the run each protects, for the engine to decide on (rescue or
-- wait). Nothing is changed or locked here: whether another transaction holds each row is
-- claim_expired_free.sql's, and release_locks fences on the token and the expiry.
-- $1 the most locks to look at. The expiry is tested on the locked rows
-- (scheduler_tasks_lock_owner_idx, one row per running run): no index holds lock_expires_at,
-- so that renewals are HOT updates.
SELECT t.name, t.lock_token, t.lock_owner, t.lock_expires_at, now() AS db_now,
       r.id AS run_id, r.scheduled_at AS run_scheduled_at, r.recovery AS run_recovery,
       r.attempt AS run_attempt, r.trigger AS run_trigger, r.triggered_by AS run_triggered_by,
       r.cancel_requested_by AS run_cancel_requested_by
FROM scheduler_tasks AS t
LEFT JOIN scheduler_runs AS r ON r.lock_token = t.lock_token AND r.status = 'running'
WHERE t.lock_token IS NOT NULL AND t.lock_expires_at < now()
ORDER BY t.lock_expires_at
LIMIT $1
