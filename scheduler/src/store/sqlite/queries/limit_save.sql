-- Write the size ?2 of the limit ?1 (crate::limits), from the config, at ?3 (now): created, or
-- changed if it differs.
INSERT INTO scheduler_limits (name, size, updated_at)
VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET size = excluded.size, updated_at = excluded.updated_at
WHERE scheduler_limits.size <> excluded.size
