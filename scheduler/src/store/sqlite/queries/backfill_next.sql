-- After a claim of one of its ticks: row ?1's backfill is due again ?2 (now) plus its pace if it
-- has a tick of that row left to run and was not cancelled; otherwise the row has no backfill
-- waiting.
-- The pace is capped at bounds::BACKFILL_PACE's maximum (1 day, 86400000 ms): no stored row
-- can overflow.
UPDATE scheduler_tasks
SET backfill_at = CASE WHEN b.left THEN ?2 + b.pace_us END,
    backfill_id = CASE WHEN b.left THEN scheduler_tasks.backfill_id END
FROM (SELECT bf.id,
             MIN(MAX(bf.pace_ms, 0), 86400000) * 1000 AS pace_us,
             bf.cancelled_at IS NULL
             AND EXISTS (SELECT 1 FROM scheduler_backfill_ticks AS bt
                         WHERE bt.backfill_id = bf.id AND bt.row_name = ?1
                           AND bt.run_id IS NULL) AS left
      FROM scheduler_backfills AS bf) AS b
WHERE scheduler_tasks.name = ?1 AND b.id = scheduler_tasks.backfill_id
