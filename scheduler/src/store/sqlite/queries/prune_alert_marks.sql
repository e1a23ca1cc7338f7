-- Delete up to ?2 alert marks recorded before ?1, oldest first.
DELETE FROM scheduler_alert_marks
WHERE rowid IN (
    SELECT rowid FROM scheduler_alert_marks
    WHERE marked_at < ?1
    ORDER BY marked_at
    LIMIT ?2
)
