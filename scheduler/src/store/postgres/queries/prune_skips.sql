-- Delete up to $2 skip records older than the retention ($1 ms).
DELETE FROM scheduler_skips
WHERE id IN (
    SELECT id FROM scheduler_skips
    WHERE recorded_at < now() - $1::int8 * interval '1 millisecond'
    ORDER BY recorded_at
    LIMIT $2
)
