SELECT
    -- @include run_columns.sql
FROM scheduler_runs
WHERE $1::text IS NULL OR task_name = $1
ORDER BY id DESC
LIMIT $2
