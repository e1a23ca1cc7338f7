-- Delete up to ?2 incidents closed before ?1, oldest first.
DELETE FROM scheduler_incidents
WHERE id IN (
    SELECT id FROM scheduler_incidents
    WHERE closed_at IS NOT NULL AND closed_at < ?1
    ORDER BY closed_at, id
    LIMIT ?2
)
