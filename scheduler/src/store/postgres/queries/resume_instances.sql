-- The rows of task $1's instances holding its pause (paused at $2 by $3, as the task's own row
-- was), locked for ending it with the task's; jitter_window_ms: each one's jitter window, its
-- own else its task's as last reconciled.
SELECT
-- @include task_state_columns.sql
       , coalesce(jitter_ms, (SELECT t.jitter_ms FROM scheduler_tasks AS t
                              WHERE t.name = $1)) AS jitter_window_ms
FROM scheduler_tasks
WHERE instance_of = $1 AND paused_at = $2 AND paused_by IS NOT DISTINCT FROM $3
ORDER BY name
FOR UPDATE
