-- ?1 version, ?2 description, ?3 now (unix µs).
INSERT INTO scheduler_migrations (version, description, applied_at) VALUES (?1, ?2, ?3)
