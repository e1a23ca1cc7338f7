-- Set (?2 = 1, keeping an earlier flag) or clear (?2 = 0) task ?1's orphan flag at ?3 (now).
UPDATE scheduler_tasks
SET orphaned_since = CASE WHEN ?2 THEN COALESCE(orphaned_since, ?3) ELSE NULL END,
    updated_at = ?3
WHERE name = ?1
