-- The latest $2 runs of each task of $1 started at or after $3, newest first, its own: an
-- instance's runs (`instance_key`) are its instance's, not on the task's strip (an index scan
-- of (task_name, instance_key, id) per task).
SELECT
    -- @include run_columns.sql
FROM unnest($1::text[]) AS t(name)
CROSS JOIN LATERAL (
    SELECT * FROM scheduler_runs
    WHERE task_name = t.name AND instance_key IS NULL AND started_at >= $3
    ORDER BY id DESC
    LIMIT $2
) AS r
ORDER BY id DESC
