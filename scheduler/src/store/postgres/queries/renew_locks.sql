-- Extend the locks node $1 holds, all in one statement, each by its own lifetime; fenced by
-- owner and token (not by expiry), so a lock taken over is never extended. Returns the locks
-- that were extended. $2, $3, $4 parallel arrays of task names, tokens and lifetimes in ms.
UPDATE scheduler_tasks AS t
SET lock_expires_at = clock_timestamp() + held.lock_ms * interval '1 millisecond'
FROM unnest($2::text[], $3::uuid[], $4::int8[]) AS held(name, token, lock_ms)
WHERE t.name = held.name AND t.lock_owner = $1 AND t.lock_token = held.token
RETURNING t.name, t.lock_token
