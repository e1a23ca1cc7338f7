-- Claim up to $2 due, pending events to the channels $4 (the ones this node knows) for node $1
-- for $3 ms (an event whose lease ran out can be claimed by another node), oldest first.
UPDATE scheduler_outbox AS o
SET locked_by = $1, locked_until = clock_timestamp() + $3::int8 * interval '1 millisecond'
FROM (
    SELECT id FROM scheduler_outbox
    WHERE state = 'pending' AND deliver_after <= now()
      AND (locked_until IS NULL OR locked_until < now())
      AND channel = ANY($4::text[])
    ORDER BY id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
) AS due
WHERE o.id = due.id
RETURNING o.id, o.channel, o.event_type, o.payload::text AS payload, o.attempts, o.created_at
