-- Records mark (?1 task, ?2 type, ?3 mark) at ?4 unless it is recorded; returns the task when
-- this statement recorded it.
INSERT INTO scheduler_alert_marks (task_name, kind, mark, marked_at)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT DO NOTHING
RETURNING task_name
