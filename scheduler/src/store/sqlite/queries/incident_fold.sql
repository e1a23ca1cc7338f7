-- Counts an alert into incident ?1 at ?6 (now): key ?2, body ?3; ?4 whether it is sent now (the
-- first sending is kept), ?5 the reminder interval in ms.
UPDATE scheduler_incidents
SET last_seen_at = ?6, count = count + 1, last_key = ?2, summary = ?3,
    notified_at = COALESCE(notified_at, CASE WHEN ?4 THEN ?6 END), remind_every_ms = ?5
WHERE id = ?1
RETURNING id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
