-- Record delivery attempts and what happens to each event next.
-- $1.. parallel arrays: event id, attempt, node, status, error, duration ms, next state
-- ('delivered' | 'pending' | 'failed' | 'disabled'), next attempt time (pending only).
WITH d AS (
    SELECT *
    FROM unnest($1::int8[], $2::int4[], $3::text[], $4::int4[], $5::text[], $6::int4[],
                $7::text[], $8::timestamptz[])
         AS d(outbox_id, attempt, node_id, status, error, duration_ms, next_state, retry_at)
), logged AS (
    INSERT INTO scheduler_webhook_deliveries (outbox_id, attempt, node_id, status, error,
                                              duration_ms)
    SELECT outbox_id, attempt, node_id, status, error, duration_ms FROM d
)
UPDATE scheduler_outbox AS o
SET state = d.next_state,
    attempts = d.attempt,
    deliver_after = COALESCE(d.retry_at, o.deliver_after),
    locked_by = NULL,
    locked_until = NULL,
    last_error = d.error,
    delivered_at = CASE WHEN d.next_state = 'delivered' THEN clock_timestamp() END
FROM d
WHERE o.id = d.outbox_id
