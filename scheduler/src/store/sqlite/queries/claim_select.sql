-- Up to ?3 unlocked tasks among the names ?2 (a JSON array; with their shards' rows) with something due at ?1 (now): an
-- enabled, unpaused task's tick (due by ?4: a claim ahead of the tick), retry or backfill tick
-- (with the backfill's earliest tick not yet run), an expired pause (to end it), or a manual run
-- of an unpaused task (rows pinned to another node than ?5 left out: a broadcast task's node
-- rows); oldest first (the earliest of the five instants, NULLs ignored like
-- PostgreSQL's LEAST; then by name). No row locking is needed: the claim's IMMEDIATE
-- transaction holds the database's write lock, so no other writer can interleave.
SELECT
    -- @include due_columns.sql
FROM scheduler_tasks AS task
WHERE lock_token IS NULL
  AND (name IN (SELECT value FROM json_each(?2)) OR shard_of IN (SELECT value FROM json_each(?2))
       OR instance_of IN (SELECT value FROM json_each(?2)))
  AND (node_pin IS NULL OR node_pin = '' OR node_pin = ?5)
  AND ((enabled = 1 AND paused_at IS NULL
        AND (next_run_at <= ?4 OR retry_at <= ?1 OR backfill_at <= ?1))
       OR (paused_at IS NOT NULL AND pause_until <= ?1)
       OR (paused_at IS NULL AND manual_at <= ?1))
ORDER BY min(coalesce(next_run_at, 9223372036854775807), coalesce(retry_at, 9223372036854775807),
             coalesce(manual_at, 9223372036854775807), coalesce(pause_until, 9223372036854775807),
             coalesce(backfill_at, 9223372036854775807)),
         name
LIMIT ?3
