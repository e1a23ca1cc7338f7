-- Lock up to $1 unlocked tasks with something due, whoever registers them, earliest first: the
-- node keeps its own (in Rust) and asks claim_select.sql by name only when others' tasks filled
-- the page. Each kind of due time reads its partial index in order and locks as it goes, up to
-- $1 rows: an enabled, unpaused task's tick (due within $2 ms from now: a claim ahead of the
-- tick), retry or backfill tick (with the backfill's earliest tick not yet run), a manual run of
-- an unpaused task, the end of a pause. Rows another
-- transaction holds (a claim on another node, a reconcile) are skipped, not waited for. A row
-- due in more than one kind comes once per kind (the node keeps the first: a sort to remove
-- them here cost more than it saved, 10,000 wide rows per claim of a whole tick); rows locked
-- past the $1 returned are left as they were (unlocked at commit).
-- Rows pinned to another node (a broadcast task's node rows, see crate::shard) are left out:
-- $3 is the claiming node. So are the rows of the tasks $4 (and their shards' rows) the node
-- leaves out of this claim: not even locked, so other nodes' claims of them go on (a node
-- holding its whole share of a sharded tick, see crate::shard::ShardFacts::share_complete).
-- No name is tested here: claim_select.sql's test against 10,000 names looks every name up by
-- primary key (21,000 buffers and 45 ms per claim of 1,000 under load; this query: 1,300 and
-- 10 ms).
WITH tick AS (
    SELECT * FROM scheduler_tasks
    WHERE enabled AND paused_at IS NULL AND lock_token IS NULL
      AND next_run_at <= now() + $2 * interval '1 millisecond'
      AND (node_pin IS NULL OR node_pin = '' OR node_pin = $3)
      AND coalesce(shard_of, name) <> ALL($4)
    ORDER BY next_run_at LIMIT $1
    FOR UPDATE SKIP LOCKED
), retry AS (
    SELECT * FROM scheduler_tasks
    WHERE retry_at <= now() AND enabled AND paused_at IS NULL AND lock_token IS NULL
      AND (node_pin IS NULL OR node_pin = '' OR node_pin = $3)
      AND coalesce(shard_of, name) <> ALL($4)
    ORDER BY retry_at LIMIT $1
    FOR UPDATE SKIP LOCKED
), manual AS (
    SELECT * FROM scheduler_tasks
    WHERE manual_at <= now() AND paused_at IS NULL AND lock_token IS NULL
      AND (node_pin IS NULL OR node_pin = '' OR node_pin = $3)
      AND coalesce(shard_of, name) <> ALL($4)
    ORDER BY manual_at LIMIT $1
    FOR UPDATE SKIP LOCKED
), backfill AS (
    SELECT * FROM scheduler_tasks
    WHERE backfill_at <= now() AND enabled AND paused_at IS NULL AND lock_token IS NULL
      AND (node_pin IS NULL OR node_pin = '' OR node_pin = $3)
      AND coalesce(shard_of, name) <> ALL($4)
    ORDER BY backfill_at LIMIT $1
    FOR UPDATE SKIP LOCKED
), pause AS (
    SELECT * FROM scheduler_tasks
    WHERE paused_at IS NOT NULL AND pause_until <= now() AND lock_token IS NULL
      AND (node_pin IS NULL OR node_pin = '' OR node_pin = $3)
      AND coalesce(shard_of, name) <> ALL($4)
    ORDER BY pause_until LIMIT $1
    FOR UPDATE SKIP LOCKED
), due AS (
    SELECT * FROM tick UNION ALL SELECT * FROM retry UNION ALL SELECT * FROM manual
    UNION ALL SELECT * FROM pause UNION ALL SELECT * FROM backfill
)
SELECT
    -- @include due_columns.sql
    , now() AS db_now
FROM due AS task
ORDER BY LEAST(next_run_at, retry_at, manual_at, pause_until, backfill_at)
LIMIT $1
