-- Delete up to $2 alert marks older than the retention ($1 ms).
DELETE FROM scheduler_alert_marks
WHERE (task_name, kind, mark) IN (
    SELECT task_name, kind, mark FROM scheduler_alert_marks
    WHERE marked_at < now() - $1::int8 * interval '1 millisecond'
    ORDER BY marked_at
    LIMIT $2
)
