-- The record of applied migrations; created before anything else so it can be read.
CREATE TABLE IF NOT EXISTS scheduler_migrations (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  INTEGER NOT NULL
) STRICT
