-- Read back events whose insert got no answer ($1, $2, $3 parallel arrays: type, JSON body,
-- channel): for each, whether a row with the same type, body and channel was written in the last
-- $4 ms. The engine decides from these whether the insert was committed (see
-- operations/outbox.rs).
SELECT EXISTS (
    SELECT 1
    FROM scheduler_outbox AS o
    WHERE o.created_at >= clock_timestamp() - $4 * interval '1 millisecond'
      AND o.event_type = e.kind AND o.payload = e.payload::jsonb AND o.channel = e.channel
)
FROM unnest($1::text[], $2::text[], $3::text[]) AS e(kind, payload, channel)
