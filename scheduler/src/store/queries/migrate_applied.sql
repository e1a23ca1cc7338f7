SELECT version FROM scheduler_migrations ORDER BY version
