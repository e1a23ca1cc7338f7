-- Locks past their expiry at ?1 (now), with the run each protects, for the engine to decide on
-- (rescue or wait). ?2 the most locks to look at. Nothing is changed here: release_lock fences
-- on the token and the expiry.
SELECT t.name, t.lock_token, t.lock_owner, t.lock_expires_at,
       r.id AS run_id, r.scheduled_at AS run_scheduled_at, r.recovery AS run_recovery,
       r.attempt AS run_attempt, r.trigger AS run_trigger, r.triggered_by AS run_triggered_by,
       r.cancel_requested_by AS run_cancel_requested_by
FROM scheduler_tasks AS t
LEFT JOIN scheduler_runs AS r ON r.lock_token = t.lock_token AND r.status = 'running'
WHERE t.lock_token IS NOT NULL AND t.lock_expires_at < ?1
ORDER BY t.lock_expires_at
LIMIT ?2
