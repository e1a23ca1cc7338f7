-- The latest ?3 runs of each instance of task ?1 whose key is in ?2 (a JSON array), newest
-- first.
SELECT
    -- @include run_columns.sql
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY instance_key ORDER BY id DESC) AS n
    FROM scheduler_runs
    WHERE task_name = ?1 AND instance_key IN (SELECT value FROM json_each(?2))
)
WHERE n <= ?3
ORDER BY id DESC
