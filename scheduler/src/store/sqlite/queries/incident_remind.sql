-- Claims up to ?2 reminders due at ?1 (now): open incidents whose alert was sent, whose
-- reminder interval has passed since the last reminder (or the alert), of tasks not snoozed.
-- The interval is capped at bounds::SLA_REMIND_EVERY's maximum (1 year, 31557600000 ms).
UPDATE scheduler_incidents
SET reminded_at = ?1, reminders = reminders + 1
WHERE id IN (
    SELECT i.id FROM scheduler_incidents AS i
    WHERE i.closed_at IS NULL
      AND i.notified_at IS NOT NULL
      AND i.remind_every_ms IS NOT NULL
      AND COALESCE(i.reminded_at, i.notified_at) + MIN(i.remind_every_ms, 31557600000) * 1000 <= ?1
      AND NOT EXISTS (
          SELECT 1 FROM scheduler_snoozes AS s WHERE s.task_name = i.task_name AND s.until > ?1
      )
    ORDER BY i.id
    LIMIT ?2
)
RETURNING id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
