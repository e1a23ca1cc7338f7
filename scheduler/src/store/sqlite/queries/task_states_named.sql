-- Everything about the rows named in ?1 (a JSON array of tasks' own rows; a name with none is
-- left out), by name: one read for the runs of a page of many tasks.
SELECT
-- @include task_state_columns.sql
FROM scheduler_tasks
WHERE name IN (SELECT value FROM json_each(?1))
ORDER BY name
