CREATE TABLE IF NOT EXISTS scheduler_migrations (
    version     bigint PRIMARY KEY,
    description text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
