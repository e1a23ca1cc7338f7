-- Claim up to ?2 due, pending events to the channels ?5 (a JSON array: the ones this node knows)
-- at ?3 (now) for node ?1 until ?4 (an event whose lease ran out can be claimed again), oldest
-- first.
UPDATE scheduler_outbox
SET locked_by = ?1, locked_until = ?4
WHERE id IN (
    SELECT id FROM scheduler_outbox
    WHERE state = 'pending' AND deliver_after <= ?3
      AND (locked_until IS NULL OR locked_until < ?3)
      AND channel IN (SELECT value FROM json_each(?5))
    ORDER BY id
    LIMIT ?2
)
RETURNING id, channel, event_type, payload, attempts, created_at
