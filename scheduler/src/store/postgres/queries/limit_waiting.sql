-- Mark the rows $1 (selected by the claim, same transaction) waiting for their limit
-- (crate::limits), since now unless already waiting.
UPDATE scheduler_tasks
SET limit_waiting_since = now()
WHERE name = ANY($1) AND limit_waiting_since IS NULL AND lock_token IS NULL
