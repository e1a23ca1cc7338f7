-- The delivery log of the events prune_outbox deletes next, in the same transaction (the same
-- selection: nothing changes between the two statements, and the order is total).
DELETE FROM scheduler_webhook_deliveries
WHERE outbox_id IN (
    SELECT id FROM scheduler_outbox
    WHERE state <> 'pending' AND created_at < ?1
    ORDER BY created_at, id
    LIMIT ?2
)
