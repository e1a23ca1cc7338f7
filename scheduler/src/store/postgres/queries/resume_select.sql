-- The row of a paused task, locked for ending its pause. $1 task.
SELECT
-- @include task_state_columns.sql
       , clock_timestamp() AS db_now
FROM scheduler_tasks
WHERE name = $1 AND paused_at IS NOT NULL
FOR UPDATE
