-- Write events to deliver. $1, $2 parallel arrays: type, JSON body.
INSERT INTO scheduler_outbox (event_type, payload)
SELECT kind, payload::jsonb FROM unnest($1::text[], $2::text[]) AS e(kind, payload)
