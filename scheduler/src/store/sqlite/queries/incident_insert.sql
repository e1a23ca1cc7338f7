-- Opens task ?1's incident of type ?2 at ?3 (now) with key ?4 and body ?5; ?6 when it was
-- sent (NULL: held back), ?7 its reminder interval in ms.
INSERT INTO scheduler_incidents
    (task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms)
VALUES (?1, ?2, ?3, ?3, 1, ?4, ?5, ?6, ?7)
RETURNING id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
