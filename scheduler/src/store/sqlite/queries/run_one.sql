SELECT
    -- @include run_columns.sql
FROM scheduler_runs
WHERE id = ?1
