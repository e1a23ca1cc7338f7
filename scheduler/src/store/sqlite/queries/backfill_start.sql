-- Task ?1 has backfill ?2 waiting, due at ?3 (now).
UPDATE scheduler_tasks SET backfill_id = ?2, backfill_at = ?3, updated_at = ?3 WHERE name = ?1
