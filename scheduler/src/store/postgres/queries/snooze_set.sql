-- Snoozes task $1 until $2 because of $3, by $4, replacing its snooze, if the task exists.
-- Returns the task when it does.
INSERT INTO scheduler_snoozes (task_name, until, reason, snoozed_by)
SELECT name, $2, $3, $4 FROM scheduler_tasks WHERE name = $1
ON CONFLICT (task_name) DO UPDATE
SET until = excluded.until, reason = excluded.reason, snoozed_by = excluded.snoozed_by,
    snoozed_at = now()
RETURNING task_name
