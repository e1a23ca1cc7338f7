-- Task ?1's snooze in force at ?2, if any.
SELECT task_name, until, reason, snoozed_by, snoozed_at
FROM scheduler_snoozes
WHERE task_name = ?1 AND until > ?2
