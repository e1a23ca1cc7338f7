-- Cancel backfill ?1 by ?2 at ?3 (now), unless it was cancelled already or has no tick left to
-- run; returns its task and how many ticks will not run.
UPDATE scheduler_backfills
SET cancelled_at = ?3, cancelled_by = ?2
WHERE id = ?1 AND cancelled_at IS NULL
  AND EXISTS (SELECT 1 FROM scheduler_backfill_ticks WHERE backfill_id = ?1 AND run_id IS NULL)
RETURNING task_name,
          (SELECT count(*) FROM scheduler_backfill_ticks
           WHERE backfill_id = ?1 AND run_id IS NULL) AS dropped
