-- Log a delivery attempt at ?7 (now): ?1 event id, ?2 attempt, ?3 node, ?4 HTTP status, ?5 error,
-- ?6 duration in ms.
INSERT INTO scheduler_webhook_deliveries (outbox_id, attempt, node_id, at, status, error,
                                          duration_ms)
VALUES (?1, ?2, ?3, ?7, ?4, ?5, ?6)
