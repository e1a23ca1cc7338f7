-- The latest-ending ?2 skip records of each task of ?1 (a JSON array) whose range ends at or
-- after ?3, newest first.
SELECT task_name, reason, first_tick, last_tick, ticks, exact, run_id
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY task_name ORDER BY last_tick DESC, id DESC) AS n
    FROM scheduler_skips
    WHERE task_name IN (SELECT value FROM json_each(?1)) AND last_tick >= ?3
)
WHERE n <= ?2
ORDER BY last_tick DESC
