-- Which of the rows $1 (expired locks' tasks) no other transaction holds right now. Run inside
-- a savepoint the claim rolls back at once, so the share locks taken here are gone before the
-- claim goes on. FOR SHARE conflicts with what holds a task row for a write (an UPDATE's FOR
-- NO KEY UPDATE, the reconciler's FOR UPDATE), stuck or not, and not with another claim's
-- look: two nodes looking at once do not see each other.
SELECT name
FROM scheduler_tasks
WHERE name = ANY($1)
FOR SHARE SKIP LOCKED
