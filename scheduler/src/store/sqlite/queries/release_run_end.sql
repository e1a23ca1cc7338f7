-- End run ?1, still running under the released lock ?2, as the rescue decided: status ?3, error
-- ?4, at ?5 (now).
UPDATE scheduler_runs
SET status = ?3, finished_at = ?5, error = ?4
WHERE id = ?1 AND lock_token = ?2 AND status = 'running'
