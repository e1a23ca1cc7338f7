-- Claims up to $1 reminders due: open incidents whose alert was sent, whose reminder interval
-- has passed since the last reminder (or the alert), of tasks not snoozed. Rows another node
-- is claiming are skipped (it reminds them). The interval is capped at bounds::SLA_REMIND_EVERY's
-- maximum (1 year, 31557600000 ms): no stored row can overflow.
UPDATE scheduler_incidents
SET reminded_at = now(), reminders = reminders + 1
WHERE id IN (
    SELECT i.id FROM scheduler_incidents AS i
    WHERE i.closed_at IS NULL
      AND i.notified_at IS NOT NULL
      AND i.remind_every_ms IS NOT NULL
      AND COALESCE(i.reminded_at, i.notified_at)
          + LEAST(i.remind_every_ms, 31557600000) * interval '1 millisecond' <= now()
      AND NOT EXISTS (
          SELECT 1 FROM scheduler_snoozes AS s
          WHERE s.task_name = i.task_name AND s.until > now()
      )
    ORDER BY i.id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
RETURNING id, task_name, kind, opened_at, last_seen_at, count, last_key, summary, notified_at, remind_every_ms, reminded_at, reminders, closed_at, closed_by
