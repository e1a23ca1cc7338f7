-- Incidents, newest first: ?1 1 open only, 0 closed only, NULL both; ?2 one task's (NULL:
-- every task's); at most ?3.
SELECT id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
FROM scheduler_incidents
WHERE (?1 IS NULL OR (?1 = 1 AND closed_at IS NULL) OR (?1 = 0 AND closed_at IS NOT NULL))
  AND (?2 IS NULL OR task_name = ?2)
ORDER BY id DESC
LIMIT ?3
