-- Extend the locks node $1 holds, all in one statement; fenced by owner and token, so a lock
-- taken over is never extended. Returns the locks that were extended.
-- $2 lock lifetime in ms; $3, $4 parallel arrays of task names and tokens.
UPDATE scheduler_tasks AS t
SET lock_expires_at = clock_timestamp() + $2::int8 * interval '1 millisecond'
FROM unnest($3::text[], $4::uuid[]) AS held(name, token)
WHERE t.name = held.name AND t.lock_owner = $1 AND t.lock_token = held.token
RETURNING t.name, t.lock_token
