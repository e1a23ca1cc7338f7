-- Give up the oldest pending events beyond the newest $1 (an endpoint that hangs must not grow
-- the outbox without bound), with $2 as their last error. Rows another transaction holds are
-- left for the next pass.
WITH beyond AS (
    SELECT id FROM scheduler_outbox
    WHERE state = 'pending'
    ORDER BY id DESC
    OFFSET $1
    FOR UPDATE SKIP LOCKED
)
UPDATE scheduler_outbox AS o
SET state = 'failed', locked_by = NULL, locked_until = NULL, last_error = $2
FROM beyond
WHERE o.id = beyond.id
