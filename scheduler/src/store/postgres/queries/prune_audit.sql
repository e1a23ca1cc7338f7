-- Delete up to $2 audit entries older than the retention ($1 ms).
DELETE FROM scheduler_audit
WHERE id IN (
    SELECT id FROM scheduler_audit
    WHERE at < now() - $1::int8 * interval '1 millisecond'
    ORDER BY at
    LIMIT $2
)
