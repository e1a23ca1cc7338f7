-- When should a node registering the tasks $1 look again? The earliest time something of an
-- unlocked task it may claim becomes due (a tick or retry of an enabled, unpaused task, a manual
-- run of an unpaused one, the end of a pause), and the earliest lock expiry of any task (any
-- node may rescue an expired lock). A locked task needs no wake of its own: its release
-- notifies, its expiry is a lock's.
-- Each candidate is its own min() so that each uses its partial index and stops at the first
-- matching row (with 10,000 idle tasks: 7 buffers instead of a scan of the table; the plan is in
-- BENCHMARKS.md). The name test is written `(name || '') = ANY($1)` so that no plan can use the
-- primary key for it: the generic plan of a prepared statement guesses 10 names for $1 and would
-- look up every registered name (10,000 names: 20,000 buffers, 9 to 17 ms) instead of testing
-- only the rows the partial index yields (usually the first one).
SELECT now() AS db_now,
       LEAST((SELECT min(next_run_at) FROM scheduler_tasks
              WHERE enabled AND next_run_at IS NOT NULL AND paused_at IS NULL
                AND lock_token IS NULL AND (name || '') = ANY($1)),
             (SELECT min(retry_at) FROM scheduler_tasks
              WHERE retry_at IS NOT NULL AND enabled AND paused_at IS NULL
                AND lock_token IS NULL AND (name || '') = ANY($1)),
             (SELECT min(manual_at) FROM scheduler_tasks
              WHERE manual_at IS NOT NULL AND paused_at IS NULL
                AND lock_token IS NULL AND (name || '') = ANY($1)),
             (SELECT min(pause_until) FROM scheduler_tasks
              WHERE paused_at IS NOT NULL AND pause_until IS NOT NULL
                AND lock_token IS NULL AND (name || '') = ANY($1))) AS due_at,
       (SELECT min(lock_expires_at) FROM scheduler_tasks
        WHERE lock_token IS NOT NULL) AS expiry_at
