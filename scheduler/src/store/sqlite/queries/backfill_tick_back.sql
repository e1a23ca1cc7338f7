-- Backfill tick ?3 of row ?2, served by run ?1 that was handed back before it started, is
-- pending again (claimed later as if it had never been; with its backfill cancelled, it is one
-- the cancel left unrun). Run after release_lock.sql released the row's lock with the requeue,
-- unless the row waits for another backfill by now: then the tick stays served by the run.
UPDATE scheduler_backfill_ticks
SET run_id = NULL
WHERE run_id = ?1 AND row_name = ?2 AND tick = ?3
  AND EXISTS (SELECT 1 FROM scheduler_tasks AS t
              WHERE t.name = ?2
                AND (t.backfill_id IS NULL
                     OR t.backfill_id = scheduler_backfill_ticks.backfill_id))
