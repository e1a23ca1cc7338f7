-- Task ?1, if it exists.
SELECT name FROM scheduler_tasks WHERE name = ?1
