-- Closes task ?1's open incident of type ?2 at ?3 (now) because of ?4; returns it.
UPDATE scheduler_incidents
SET closed_at = ?3, closed_by = ?4
WHERE task_name = ?1 AND kind = ?2 AND closed_at IS NULL
RETURNING id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
