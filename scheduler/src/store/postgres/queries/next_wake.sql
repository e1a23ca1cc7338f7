-- When should a node look again? The earliest candidates of each kind of due time of an
-- unlocked task (a tick, retry or backfill tick of an enabled, unpaused task, a manual run of an unpaused one,
-- the end of a pause), at most $1 of each, earliest first, with their names: the node keeps
-- those it registers (in Rust; with the same binary on every node, the first one). Then the
-- earliest lock expiry of any task (any node may rescue an expired lock) with the clock. A
-- locked task needs no wake of its own: its release notifies, its expiry is a lock's.
-- No name is tested here: a name test against the node's 10,000 names is a linear search of
-- the array per row (prepared statements cannot hash a parameter array), and a plan that
-- tested every unlocked row took 0.9 s. Each kind reads its partial index in order and stops
-- after $1 rows (a scan of the table at worst, still without a per-row search). When no
-- candidate of a kind is registered here, next_wake_named.sql answers for this node's names.
-- Rows pinned to another node than $2 (a broadcast task's node rows) are left out.
-- The lock expiry reads the locked rows (one per running run) through
-- scheduler_tasks_lock_owner_idx: no index holds lock_expires_at, so that renewals are HOT.
(SELECT 'tick' AS kind, name, next_run_at AS at, NULL::timestamptz AS db_now FROM scheduler_tasks
 WHERE enabled AND next_run_at IS NOT NULL AND paused_at IS NULL AND lock_token IS NULL
   AND (node_pin IS NULL OR node_pin = '' OR node_pin = $2)
 ORDER BY next_run_at LIMIT $1)
UNION ALL
(SELECT 'retry', name, retry_at, NULL FROM scheduler_tasks
 WHERE retry_at IS NOT NULL AND enabled AND paused_at IS NULL AND lock_token IS NULL
   AND (node_pin IS NULL OR node_pin = '' OR node_pin = $2)
 ORDER BY retry_at LIMIT $1)
UNION ALL
(SELECT 'manual', name, manual_at, NULL FROM scheduler_tasks
 WHERE manual_at IS NOT NULL AND paused_at IS NULL AND lock_token IS NULL
   AND (node_pin IS NULL OR node_pin = '' OR node_pin = $2)
 ORDER BY manual_at LIMIT $1)
UNION ALL
(SELECT 'backfill', name, backfill_at, NULL FROM scheduler_tasks
 WHERE backfill_at IS NOT NULL AND enabled AND paused_at IS NULL AND lock_token IS NULL
   AND (node_pin IS NULL OR node_pin = '' OR node_pin = $2)
 ORDER BY backfill_at LIMIT $1)
UNION ALL
(SELECT 'pause', name, pause_until, NULL FROM scheduler_tasks
 WHERE paused_at IS NOT NULL AND pause_until IS NOT NULL AND lock_token IS NULL
   AND (node_pin IS NULL OR node_pin = '' OR node_pin = $2)
 ORDER BY pause_until LIMIT $1)
UNION ALL
SELECT 'expiry', NULL, (SELECT min(lock_expires_at) FROM scheduler_tasks
                        WHERE lock_token IS NOT NULL), now()
