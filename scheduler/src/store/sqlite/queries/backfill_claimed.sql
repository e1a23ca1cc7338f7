-- The tick ?2 of backfill ?1 on row ?4 is served by run ?3 (claimed in the same transaction).
UPDATE scheduler_backfill_ticks SET run_id = ?3
WHERE backfill_id = ?1 AND tick = ?2 AND row_name = ?4
