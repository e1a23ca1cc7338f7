-- The latest $2 runs of each task of $1 started at or after $3, newest first (an index scan
-- of (task_name, id) per task).
SELECT
    -- @include run_columns.sql
FROM unnest($1::text[]) AS t(name)
CROSS JOIN LATERAL (
    SELECT * FROM scheduler_runs
    WHERE task_name = t.name AND started_at >= $3
    ORDER BY id DESC
    LIMIT $2
) AS r
ORDER BY id DESC
