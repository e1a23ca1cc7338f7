-- Give up the oldest pending events beyond the newest ?1 (an endpoint that hangs must not grow
-- the outbox without bound), with ?2 as their last error.
UPDATE scheduler_outbox
SET state = 'failed', locked_by = NULL, locked_until = NULL, last_error = ?2
WHERE id IN (
    SELECT id FROM scheduler_outbox
    WHERE state = 'pending'
    ORDER BY id DESC
    LIMIT -1 OFFSET ?1
)
