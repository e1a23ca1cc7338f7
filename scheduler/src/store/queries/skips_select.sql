-- Skip records of task $1 whose range ends at or after $2, oldest first.
SELECT task_name, reason, first_tick, last_tick, ticks, exact, run_id
FROM scheduler_skips
WHERE task_name = $1 AND last_tick >= $2
ORDER BY first_tick, id
