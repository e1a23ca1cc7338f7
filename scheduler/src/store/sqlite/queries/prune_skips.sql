-- Delete up to ?2 skip records recorded before ?1, oldest first.
DELETE FROM scheduler_skips
WHERE id IN (
    SELECT id FROM scheduler_skips
    WHERE recorded_at < ?1
    ORDER BY recorded_at, id
    LIMIT ?2
)
