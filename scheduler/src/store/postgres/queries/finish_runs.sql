-- Record the end of a batch of runs as the engine decided it, and release each lock that is
-- still ours (token fence). A run another node already marked `lost` still gets its real
-- outcome. A hand-over tick becomes due again at once. Wakes the other nodes once per batch.
-- $1.. parallel arrays: run id, task, token, status, error, hand-over tick, failure count action,
-- ticks collapsed; $9 notify channel. Returns each run written and whether its lock was held.
WITH outcome AS (
    SELECT *
    FROM unnest($1::int8[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::timestamptz[],
                $7::text[], $8::int4[])
         AS o(run_id, task_name, token, status, error, hand_over, failures, collapsed)
), run AS (
    UPDATE scheduler_runs AS r
    SET status = o.status,
        finished_at = clock_timestamp(),
        error = CASE WHEN r.status = 'lost'
                     THEN concat_ws(' ', o.error, '(recorded after another node released the lock)')
                     ELSE o.error END,
        ticks_collapsed = o.collapsed
    FROM outcome AS o
    WHERE r.id = o.run_id AND r.lock_token = o.token AND r.status IN ('running', 'lost')
    RETURNING r.id
), released AS (
    UPDATE scheduler_tasks AS t
    SET lock_owner = NULL,
        lock_token = NULL,
        lock_expires_at = NULL,
        next_run_at = CASE WHEN o.hand_over IS NULL THEN t.next_run_at
                           ELSE LEAST(t.next_run_at, o.hand_over) END,
        last_finished_at = clock_timestamp(),
        last_status = o.status,
        last_error = o.error,
        consecutive_failures = CASE o.failures WHEN 'reset' THEN 0
                                               WHEN 'increment' THEN t.consecutive_failures + 1
                                               ELSE t.consecutive_failures END,
        updated_at = now()
    FROM outcome AS o
    WHERE t.name = o.task_name AND t.lock_token = o.token
    RETURNING o.run_id
), notified AS (
    SELECT pg_notify($9, 'released') FROM (SELECT 1 FROM released LIMIT 1) AS any_released
)
SELECT o.run_id, (rl.run_id IS NOT NULL) AS lock_held,
       (SELECT count(*) FROM notified) AS notified
FROM outcome AS o
LEFT JOIN released AS rl ON rl.run_id = o.run_id
