-- Audit entries, one per element of the arrays: actors $1, actions $2, tasks $3, details $4,
-- sources $5, in order.
INSERT INTO scheduler_audit (actor, action, task, detail, source)
SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
