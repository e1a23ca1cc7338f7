-- Read back a renewal whose answer was lost: of the locks node $1 renewed ($2, $3 parallel
-- arrays of task names and tokens), those still its own, with their expiry and the store's
-- clock. The engine decides from these which were extended (see operations/renew.rs).
SELECT t.name, t.lock_token, t.lock_expires_at, clock_timestamp() AS db_now
FROM scheduler_tasks AS t
JOIN unnest($2::text[], $3::uuid[]) AS held(name, token)
  ON t.name = held.name AND t.lock_token = held.token
WHERE t.lock_owner = $1
