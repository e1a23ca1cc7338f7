INSERT INTO scheduler_migrations (version, description) VALUES ($1, $2)
