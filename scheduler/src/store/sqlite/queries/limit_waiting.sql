-- Mark the row ?1 (selected by the claim, same transaction) waiting for its limit
-- (crate::limits), since ?2 (now) unless already waiting.
UPDATE scheduler_tasks
SET limit_waiting_since = ?2
WHERE name = ?1 AND limit_waiting_since IS NULL AND lock_token IS NULL
