-- HOT lock renewals: a renewal (renew_locks.sql) sets only `lock_expires_at`, so it can be a
-- heap-only-tuple update (no index entries written, the old version pruned in place) if no
-- index contains that column and the row's page has room for the new version.
-- Never edit a migration after it has landed.

-- The locked rows without their expiry: the expired-lock search and the wake-time query's
-- expiry candidate read the locked rows through this index and test their expiry on the heap
-- (as many rows as there are running runs), and a node's count of running runs (nodes.sql)
-- finds its own. lock_owner and lock_token change only when a lock is taken or released,
-- updates that move next_run_at or lock_token anyway.
DROP INDEX scheduler_tasks_locked_idx;
CREATE INDEX scheduler_tasks_lock_owner_idx ON scheduler_tasks (lock_owner)
    WHERE lock_token IS NOT NULL;

-- Room on every page for a new version of each of its rows: one renewal statement renews every
-- lock of a node at once, so when all rows of a page are locked (long handlers) each needs
-- space for its new version at the same time, and the dead versions of the previous renewal
-- are pruned only when the page is visited again. Half-full pages leave that room; the table
-- has one row per task (10,000 tasks: about 1.3 MB at fillfactor 100, 2.7 MB at 50).
ALTER TABLE scheduler_tasks SET (fillfactor = 50);

-- The fillfactor applies only to pages written from now on: rewrite the table so its existing
-- pages get the room too (an ACCESS EXCLUSIVE lock for the rewrite, which takes milliseconds at
-- this size; VACUUM FULL cannot run in the migration's transaction, CLUSTER can). Ordered by
-- name, the order in which renewals and outcome batches update rows.
CLUSTER scheduler_tasks USING scheduler_tasks_pkey;
