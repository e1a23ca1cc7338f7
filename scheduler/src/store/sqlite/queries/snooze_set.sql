-- Snoozes task ?1 until ?2 because of ?3, by ?4, at ?5 (now), replacing its snooze.
INSERT INTO scheduler_snoozes (task_name, until, reason, snoozed_by, snoozed_at)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (task_name) DO UPDATE
SET until = excluded.until, reason = excluded.reason, snoozed_by = excluded.snoozed_by,
    snoozed_at = excluded.snoozed_at
