-- Delete up to $2 incidents closed longer ago than the retention ($1 ms).
DELETE FROM scheduler_incidents
WHERE id IN (
    SELECT id FROM scheduler_incidents
    WHERE closed_at IS NOT NULL AND closed_at < now() - $1::int8 * interval '1 millisecond'
    ORDER BY closed_at
    LIMIT $2
)
