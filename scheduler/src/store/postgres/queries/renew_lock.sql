-- Extend our lock; fenced by owner and token, so a lock taken over is never extended.
UPDATE scheduler_tasks
SET lock_expires_at = clock_timestamp() + $4::int8 * interval '1 millisecond'
WHERE name = $1 AND lock_owner = $2 AND lock_token = $3
RETURNING lock_expires_at
