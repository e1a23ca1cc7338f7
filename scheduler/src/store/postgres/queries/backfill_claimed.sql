-- Backfill ticks just claimed (same transaction as claim_apply): each tick of a row is served by
-- its run there, and the row's backfill is due again at now() plus the backfill's pace if a tick of the row is left to
-- run and the backfill was not cancelled; otherwise the task has no backfill waiting.
-- $1.. parallel arrays: task, backfill id, tick, run id. The pace is capped at
-- bounds::BACKFILL_PACE's maximum (1 day, 86400000 ms) so that no stored row can overflow.
WITH c AS (
    SELECT * FROM unnest($1::text[], $2::int8[], $3::timestamptz[], $4::int8[])
        AS c(name, backfill_id, tick, run_id)
), served AS (
    UPDATE scheduler_backfill_ticks AS bt
    SET run_id = c.run_id
    FROM c
    WHERE bt.backfill_id = c.backfill_id AND bt.row_name = c.name AND bt.tick = c.tick
    RETURNING bt.backfill_id
), next AS (
    SELECT c.name, c.backfill_id,
           b.cancelled_at IS NULL
           AND EXISTS (SELECT 1 FROM scheduler_backfill_ticks AS bt
                       WHERE bt.backfill_id = c.backfill_id AND bt.row_name = c.name
                         AND bt.run_id IS NULL AND bt.tick <> c.tick) AS left,
           b.pace_ms
    FROM c JOIN scheduler_backfills AS b ON b.id = c.backfill_id
)
UPDATE scheduler_tasks AS t
SET backfill_at = CASE WHEN n.left THEN now() + LEAST(n.pace_ms, 86400000) * interval '1 millisecond' END,
    backfill_id = CASE WHEN n.left THEN t.backfill_id END
FROM next AS n
WHERE t.name = n.name AND t.backfill_id = n.backfill_id
