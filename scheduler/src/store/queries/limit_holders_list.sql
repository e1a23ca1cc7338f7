-- The holders of every limit shared by tasks (crate::limits): the locked rows whose lock holds
-- one, with their node and the run under the lock.
SELECT t.limit_held AS limit_name, t.name, t.lock_owner, r.id AS run_id, r.started_at
FROM scheduler_tasks AS t
LEFT JOIN scheduler_runs AS r ON r.lock_token = t.lock_token AND r.status = 'running'
WHERE t.lock_token IS NOT NULL AND t.limit_held IS NOT NULL
ORDER BY t.limit_held, t.name
