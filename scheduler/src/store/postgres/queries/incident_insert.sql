-- Opens task $1's incident of type $2 with key $3 and body $4; $5 whether it is sent now,
-- $6 its reminder interval in ms. Nothing if another transaction opened it first.
INSERT INTO scheduler_incidents
    (task_name, kind, last_key, summary, notified_at, remind_every_ms)
VALUES ($1, $2, $3, $4, CASE WHEN $5 THEN now() END, $6)
ON CONFLICT (task_name, kind) WHERE closed_at IS NULL DO NOTHING
RETURNING id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
