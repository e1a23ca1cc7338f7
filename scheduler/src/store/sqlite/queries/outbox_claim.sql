-- Claim up to ?2 due, pending events at ?3 (now) for node ?1 until ?4 (an event whose lease ran
-- out can be claimed again), oldest first.
UPDATE scheduler_outbox
SET locked_by = ?1, locked_until = ?4
WHERE id IN (
    SELECT id FROM scheduler_outbox
    WHERE state = 'pending' AND deliver_after <= ?3
      AND (locked_until IS NULL OR locked_until < ?3)
    ORDER BY id
    LIMIT ?2
)
RETURNING id, event_type, payload, attempts, created_at
