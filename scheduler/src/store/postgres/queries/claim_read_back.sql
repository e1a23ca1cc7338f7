-- Read back a claim whose COMMIT got no answer: of the lock tokens it took ($2), those on a task
-- row held by node $1, and whether each is still live. The engine decides from these what the
-- claim did (see operations/commit.rs).
SELECT lock_token, lock_expires_at > clock_timestamp() AS live
FROM scheduler_tasks
WHERE lock_owner = $1 AND lock_token = ANY($2::uuid[])
