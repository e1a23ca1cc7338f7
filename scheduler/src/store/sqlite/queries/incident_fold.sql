-- Counts an alert into incident ?1 at ?2 (now): key ?3, body ?4; ?5 now if it is sent now
-- (kept if it was sent already), ?6 the reminder interval in ms.
UPDATE scheduler_incidents
SET last_seen_at = ?2, count = count + 1, last_key = ?3, summary = ?4,
    notified_at = COALESCE(notified_at, ?5), remind_every_ms = ?6
WHERE id = ?1
RETURNING id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
