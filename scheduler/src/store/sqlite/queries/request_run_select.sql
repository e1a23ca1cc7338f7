-- Task ?1's pending manual run and pause (no row: no such task).
SELECT manual_at, paused_at, paused_by, pause_reason, pause_until
FROM scheduler_tasks
WHERE name = ?1
