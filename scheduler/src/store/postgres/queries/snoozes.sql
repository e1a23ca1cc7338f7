-- The snoozes in force, by task.
SELECT task_name, until, reason, snoozed_by, snoozed_at
FROM scheduler_snoozes
WHERE until > now()
ORDER BY task_name
