-- Read back events whose insert got no answer ($1, $2, $3 parallel arrays: type, JSON body,
-- channel): for each, when the latest row with the same type, body and channel was written
-- (among those of the last $4 ms), and the store's clock. The engine decides from these whether
-- the insert was committed (see operations/outbox.rs).
SELECT (
    SELECT max(o.created_at)
    FROM scheduler_outbox AS o
    WHERE o.created_at >= clock_timestamp() - $4 * interval '1 millisecond'
      AND o.event_type = e.kind AND o.payload = e.payload::jsonb AND o.channel = e.channel
) AS written_at, clock_timestamp() AS db_now
FROM unnest($1::text[], $2::text[], $3::text[]) AS e(kind, payload, channel)
