-- The snoozes in force at ?1, by task.
SELECT task_name, until, reason, snoozed_by, snoozed_at
FROM scheduler_snoozes
WHERE until > ?1
ORDER BY task_name
