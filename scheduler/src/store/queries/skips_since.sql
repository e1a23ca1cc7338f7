-- Skip records of every task whose range ends at or after $1: the $2 latest-ending, newest first.
SELECT task_name, reason, first_tick, last_tick, ticks, exact, run_id
FROM scheduler_skips
WHERE last_tick >= $1
ORDER BY last_tick DESC, id DESC
LIMIT $2
