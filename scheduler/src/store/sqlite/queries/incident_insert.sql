-- Opens task ?1's incident of type ?2 at ?7 (now) with key ?3 and body ?4; ?5 whether it is
-- sent now, ?6 its reminder interval in ms.
INSERT INTO scheduler_incidents
    (task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms)
VALUES (?1, ?2, ?7, ?7, 1, ?3, ?4, CASE WHEN ?5 THEN ?7 END, ?6)
RETURNING id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
