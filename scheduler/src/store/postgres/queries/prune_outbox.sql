-- Delete up to $2 delivered, failed or disabled events older than the retention ($1 ms), with
-- their delivery log.
WITH old AS (
    SELECT id FROM scheduler_outbox
    WHERE state <> 'pending' AND created_at < now() - $1::int8 * interval '1 millisecond'
    ORDER BY created_at
    LIMIT $2
), log AS (
    DELETE FROM scheduler_webhook_deliveries WHERE outbox_id IN (SELECT id FROM old)
)
DELETE FROM scheduler_outbox WHERE id IN (SELECT id FROM old)
