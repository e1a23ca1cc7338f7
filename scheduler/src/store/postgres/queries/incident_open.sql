-- Task $1's open incident of type $2, if any, locked for the fold.
SELECT id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
FROM scheduler_incidents
WHERE task_name = $1 AND kind = $2 AND closed_at IS NULL
FOR UPDATE
