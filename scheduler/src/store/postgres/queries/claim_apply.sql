-- Take the locks planned for the rows selected by claim_select (same transaction), advance each
-- row's next run, and record one running run per task.
-- $1 node id, $2 lock lifetime in ms, $3.. parallel arrays: name, token, scheduled_at,
-- next_run_at, recovery.
WITH plan AS (
    SELECT *
    FROM unnest($3::text[], $4::uuid[], $5::timestamptz[], $6::timestamptz[], $7::text[])
         AS p(name, token, scheduled_at, next_run_at, recovery)
), locked AS (
    UPDATE scheduler_tasks AS t
    SET lock_owner = $1,
        lock_token = p.token,
        lock_expires_at = clock_timestamp() + $2::int8 * interval '1 millisecond',
        next_run_at = p.next_run_at,
        last_scheduled_at = p.scheduled_at,
        last_run_at = clock_timestamp(),
        updated_at = now()
    FROM plan AS p
    WHERE t.name = p.name AND t.lock_token IS NULL
    RETURNING t.name
)
INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, status, node_id, lock_token,
                            recovery)
SELECT p.name, p.scheduled_at, clock_timestamp(), 'running', $1, p.token, p.recovery
FROM plan AS p
JOIN locked AS l ON l.name = p.name
RETURNING id, task_name, lock_token, scheduled_at
