-- Delete up to ?2 audit entries recorded before ?1, oldest first.
DELETE FROM scheduler_audit
WHERE id IN (
    SELECT id FROM scheduler_audit
    WHERE at < ?1
    ORDER BY at, id
    LIMIT ?2
)
