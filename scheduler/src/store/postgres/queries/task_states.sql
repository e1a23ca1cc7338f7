-- Everything about one task's row ($1), or every task's ($1 NULL), by name.
SELECT
-- @include task_state_columns.sql
FROM scheduler_tasks
WHERE $1::text IS NULL OR name = $1
ORDER BY name
