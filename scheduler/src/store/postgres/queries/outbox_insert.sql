-- Write events to deliver. $1, $2, $3 parallel arrays: type, JSON body, channel.
INSERT INTO scheduler_outbox (event_type, payload, channel)
SELECT kind, payload::jsonb, channel
FROM unnest($1::text[], $2::text[], $3::text[]) AS e(kind, payload, channel)
