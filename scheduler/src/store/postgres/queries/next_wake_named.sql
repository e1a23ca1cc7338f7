-- The earliest due time of an unlocked task among the names $1 (see next_wake.sql: used when
-- none of the earliest candidates of a kind is registered by the asking node, as when other
-- binaries' tasks are due first). The names are joined as a set (hashed once), not searched
-- per row. Rows pinned to another node than $2 are left out.
WITH mine AS (
    SELECT t.enabled AND t.paused_at IS NULL AS runnable, t.paused_at IS NULL AS unpaused,
           t.next_run_at, t.retry_at, t.manual_at, t.pause_until, t.backfill_at
    FROM scheduler_tasks AS t
    WHERE t.lock_token IS NULL
      AND (t.name IN (SELECT unnest($1::text[])) OR t.shard_of IN (SELECT unnest($1::text[]))
           OR t.instance_of IN (SELECT unnest($1::text[])))
      AND (t.node_pin IS NULL OR t.node_pin = '' OR t.node_pin = $2)
)
SELECT min(LEAST(CASE WHEN runnable THEN next_run_at END, CASE WHEN runnable THEN retry_at END,
                 CASE WHEN unpaused THEN manual_at END, pause_until,
                 CASE WHEN runnable THEN backfill_at END)) AS due_at
FROM mine
