-- Delete up to ?2 delivered, failed or disabled events written before ?1 (their delivery log
-- went first, by prune_deliveries).
DELETE FROM scheduler_outbox
WHERE id IN (
    SELECT id FROM scheduler_outbox
    WHERE state <> 'pending' AND created_at < ?1
    ORDER BY created_at, id
    LIMIT ?2
)
