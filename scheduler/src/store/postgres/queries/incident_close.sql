-- Closes the open incidents of (task, type) pairs $1, $2 (parallel arrays) because of $3
-- (one reason per pair); returns those this statement closed.
UPDATE scheduler_incidents AS i
SET closed_at = now(), closed_by = c.reason
FROM unnest($1::text[], $2::text[], $3::text[]) AS c(task_name, kind, reason)
WHERE i.task_name = c.task_name AND i.kind = c.kind AND i.closed_at IS NULL
RETURNING i.id, i.task_name, i.kind, i.opened_at, i.last_seen_at, i.count, i.last_key,
    i.summary, i.notified_at, i.remind_every_ms, i.reminded_at, i.reminders, i.closed_at,
    i.closed_by
