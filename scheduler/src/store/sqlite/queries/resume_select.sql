-- The row of a paused task ?1, for ending its pause (the write transaction holds it).
SELECT
-- @include task_state_columns.sql
FROM scheduler_tasks
WHERE name = ?1 AND paused_at IS NOT NULL
