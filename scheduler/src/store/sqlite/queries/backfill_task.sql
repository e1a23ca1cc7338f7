-- Task ?1's backfill still waiting to run, if any (no row: no such task).
SELECT backfill_id, backfill_at FROM scheduler_tasks WHERE name = ?1
