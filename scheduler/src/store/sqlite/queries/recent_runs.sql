-- The latest ?2 runs of task ?1 (of every task when NULL), newest first.
SELECT
    -- @include run_columns.sql
FROM scheduler_runs
WHERE ?1 IS NULL OR task_name = ?1
ORDER BY id DESC
LIMIT ?2
