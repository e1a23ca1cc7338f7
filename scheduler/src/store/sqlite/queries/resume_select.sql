-- The row of a paused task ?1 (or an instance's `task/key`), for ending its pause (the write
-- transaction holds it); jitter_window_ms: its jitter window, its own else its task's as last
-- reconciled.
SELECT
-- @include task_state_columns.sql
       , coalesce(jitter_ms, (SELECT t.jitter_ms FROM scheduler_tasks AS t
                              WHERE t.name = scheduler_tasks.instance_of)) AS jitter_window_ms
FROM scheduler_tasks
WHERE name = ?1 AND paused_at IS NOT NULL
