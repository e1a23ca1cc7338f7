-- Runs matching the filters (each NULL: any), newest first, at most $7.
-- $1 task, $2 status, $3 trigger, $4 started at or after, $5 started before, $6 id below, $8 instance key.
SELECT
    -- @include run_columns.sql
FROM scheduler_runs
WHERE ($1::text IS NULL OR task_name = $1)
  AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR trigger = $3)
  AND ($4::timestamptz IS NULL OR started_at >= $4)
  AND ($5::timestamptz IS NULL OR started_at < $5)
  AND ($6::int8 IS NULL OR id < $6)
  AND ($8::text IS NULL OR instance_key = $8)
ORDER BY id DESC
LIMIT $7
