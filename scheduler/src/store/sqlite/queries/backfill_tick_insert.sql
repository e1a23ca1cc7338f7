-- Tick ?2 of backfill ?1 on row ?3, not run yet.
INSERT INTO scheduler_backfill_ticks (backfill_id, tick, row_name) VALUES (?1, ?2, ?3)
