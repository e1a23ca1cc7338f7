-- The latest ?2 runs of each task of ?1 (a JSON array) started at or after ?3, newest first,
-- its own: an instance's runs (`instance_key`) are its instance's, not on the task's strip.
SELECT
    -- @include run_columns.sql
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY task_name ORDER BY id DESC) AS n
    FROM scheduler_runs
    WHERE task_name IN (SELECT value FROM json_each(?1)) AND instance_key IS NULL
      AND started_at >= ?3
)
WHERE n <= ?2
ORDER BY id DESC
