-- Extend task ?1's lock to ?4 if node ?2 still holds it with token ?3; fenced by owner and
-- token, not by expiry, so a lock taken over is never extended. Returns the lock when extended.
UPDATE scheduler_tasks
SET lock_expires_at = ?4
WHERE name = ?1 AND lock_owner = ?2 AND lock_token = ?3
RETURNING name, lock_token
