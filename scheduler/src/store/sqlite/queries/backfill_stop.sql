-- Task ?1 no longer waits for backfill ?2 (cancelled); ?3 now.
UPDATE scheduler_tasks SET backfill_id = NULL, backfill_at = NULL, updated_at = ?3
WHERE name = ?1 AND backfill_id = ?2
