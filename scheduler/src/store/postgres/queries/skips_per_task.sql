-- The latest-ending $2 skip records of each task of $1 whose range ends at or after $3, newest
-- first (an index scan of (task_name, last_tick) per task).
SELECT s.task_name, s.reason, s.first_tick, s.last_tick, s.ticks, s.exact, s.run_id
FROM unnest($1::text[]) AS t(name)
CROSS JOIN LATERAL (
    SELECT * FROM scheduler_skips
    WHERE task_name = t.name AND last_tick >= $3
    ORDER BY last_tick DESC, id DESC
    LIMIT $2
) AS s
ORDER BY s.last_tick DESC
