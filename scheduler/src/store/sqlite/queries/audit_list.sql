-- The newest audit entries, older than ?2 if given, at most ?1.
SELECT id, at, actor, action, task, detail, source
FROM scheduler_audit
WHERE ?2 IS NULL OR id < ?2
ORDER BY id DESC
LIMIT ?1
