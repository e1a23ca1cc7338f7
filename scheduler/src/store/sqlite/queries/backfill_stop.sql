-- The rows of task ?1 no longer wait for backfill ?2 (cancelled); ?3 now.
UPDATE scheduler_tasks SET backfill_id = NULL, backfill_at = NULL, updated_at = ?3
WHERE backfill_id = ?2
