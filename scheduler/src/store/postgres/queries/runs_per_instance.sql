-- The latest $3 runs of each instance of task $1 whose key is in $2, newest first (an index
-- scan of scheduler_runs_instance_idx per key).
SELECT
    -- @include run_columns.sql
FROM unnest($2::text[]) AS k(wanted)
CROSS JOIN LATERAL (
    SELECT * FROM scheduler_runs
    WHERE task_name = $1 AND instance_key = k.wanted
    ORDER BY id DESC
    LIMIT $3
) AS r
ORDER BY id DESC
