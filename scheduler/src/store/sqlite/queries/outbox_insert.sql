-- Write an event to deliver at ?3 (now) to channel ?4: ?1 type, ?2 JSON body.
INSERT INTO scheduler_outbox (event_type, payload, created_at, deliver_after, channel)
VALUES (?1, ?2, ?3, ?3, ?4)
