-- Task $1's own row, as an upsert of one of its instances decides on it (held against a
-- reconcile's change until the upsert commits); calendar: the task's, which an instance
-- without its own keeps; jitter_ms: the task's window as last reconciled; its pause, which a new instance takes.
SELECT enabled, shards, node_pin, calendar, jitter_ms, paused_at, paused_by, pause_reason, pause_until
FROM scheduler_tasks
WHERE name = $1 AND instance_of IS NULL
FOR SHARE
