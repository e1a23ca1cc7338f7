INSERT INTO scheduler_audit (actor, action, task, detail, source) VALUES ($1, $2, $3, $4, $5)
