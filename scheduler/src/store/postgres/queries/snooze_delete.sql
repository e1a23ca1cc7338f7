-- Lifts task $1's snooze; returns it.
DELETE FROM scheduler_snoozes
WHERE task_name = $1
RETURNING task_name, until, reason, snoozed_by, snoozed_at, until > now() AS in_force
