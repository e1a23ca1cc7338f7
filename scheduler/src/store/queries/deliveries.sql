-- The newest delivery attempts, at most $1.
SELECT d.outbox_id, o.channel, o.event_type, d.attempt, d.node_id, d.at, d.status, d.error,
       d.duration_ms
FROM scheduler_webhook_deliveries AS d
JOIN scheduler_outbox AS o ON o.id = d.outbox_id
ORDER BY d.id DESC
LIMIT $1
