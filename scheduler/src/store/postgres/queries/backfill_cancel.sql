-- Cancel backfill $1 by $2, unless it was cancelled already or has no tick left to run; its
-- task's rows stop waiting for it. Returns its task, how many ticks will not run, and its runs still
-- running (no row: nothing cancelled).
WITH cancelled AS (
    UPDATE scheduler_backfills
    SET cancelled_at = now(), cancelled_by = $2
    WHERE id = $1 AND cancelled_at IS NULL
      AND EXISTS (SELECT 1 FROM scheduler_backfill_ticks WHERE backfill_id = $1 AND run_id IS NULL)
    RETURNING task_name
), stopped AS (
    UPDATE scheduler_tasks AS t
    SET backfill_id = NULL, backfill_at = NULL, updated_at = now()
    FROM cancelled
    WHERE t.backfill_id = $1
)
SELECT task_name,
       (SELECT count(*) FROM scheduler_backfill_ticks
        WHERE backfill_id = $1 AND run_id IS NULL) AS dropped,
       ARRAY(SELECT r.id FROM scheduler_backfill_ticks AS bt
             JOIN scheduler_runs AS r ON r.id = bt.run_id
             WHERE bt.backfill_id = $1 AND r.status = 'running' ORDER BY r.id) AS running
FROM cancelled
