-- Tick ?2 of backfill ?1, not run yet.
INSERT INTO scheduler_backfill_ticks (backfill_id, tick) VALUES (?1, ?2)
