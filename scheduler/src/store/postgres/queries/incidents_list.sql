-- Incidents, newest first: $1 true open only, false closed only, NULL both; $2 one task's
-- (NULL: every task's); at most $3.
SELECT id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
FROM scheduler_incidents
WHERE ($1::boolean IS NULL OR (closed_at IS NULL) = $1::boolean)
  AND ($2::text IS NULL OR task_name = $2::text)
ORDER BY id DESC
LIMIT $3
