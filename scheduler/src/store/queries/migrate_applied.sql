SELECT version, description FROM scheduler_migrations ORDER BY version
