-- Record an audit entry at ?6 (now): ?1 actor, ?2 action, ?3 task, ?4 detail, ?5 source.
INSERT INTO scheduler_audit (at, actor, action, task, detail, source)
VALUES (?6, ?1, ?2, ?3, ?4, ?5)
