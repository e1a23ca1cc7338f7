-- Records the marks (parallel arrays $1 task, $2 type, $3 mark) not recorded yet; returns
-- those this statement recorded (one node raises each).
INSERT INTO scheduler_alert_marks (task_name, kind, mark)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT DO NOTHING
RETURNING task_name, kind, mark
