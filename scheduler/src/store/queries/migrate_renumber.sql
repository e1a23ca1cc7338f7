-- Carries a recorded migration over from an older numbering: $1 the recorded version, $2 the
-- aligned version, $3 its description (store::migrations). applied_at stays as recorded.
UPDATE scheduler_migrations SET version = $2, description = $3 WHERE version = $1
