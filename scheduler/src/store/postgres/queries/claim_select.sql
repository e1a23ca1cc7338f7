-- The claim's query by name, when claim_due.sql's page came back full with other binaries'
-- tasks among it: lock up to $2 unlocked tasks among the names $1 (and their shards' rows) with something due (an
-- enabled, unpaused task's tick due within $3 ms from now, a claim ahead of the tick, or its
-- retry or backfill tick; an expired pause (rows pinned to another node than $4 left out), to end it; a manual run of an unpaused task), oldest first. Rows
-- another transaction holds (a claim on another node, a reconcile) are skipped, not waited for.
-- Rows claim_due.sql locked in the same transaction are not skipped: they come back here.
SELECT
    -- @include due_columns.sql
    , now() AS db_now
FROM scheduler_tasks AS task
WHERE lock_token IS NULL
  AND (name = ANY($1) OR shard_of = ANY($1) OR instance_of = ANY($1))
  AND (node_pin IS NULL OR node_pin = '' OR node_pin = $4)
  AND ((enabled AND paused_at IS NULL AND (next_run_at <= now() + $3 * interval '1 millisecond'
                                        OR retry_at <= now() OR backfill_at <= now()))
       OR (paused_at IS NOT NULL AND pause_until <= now())
       OR (paused_at IS NULL AND manual_at <= now()))
ORDER BY LEAST(next_run_at, retry_at, manual_at, pause_until, backfill_at)
LIMIT $2
FOR UPDATE SKIP LOCKED
