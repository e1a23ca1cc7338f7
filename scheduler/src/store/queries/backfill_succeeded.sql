-- The distinct ticks of task $1 in [$2, $3] with a succeeded run (any trigger), in order.
SELECT DISTINCT scheduled_at
FROM scheduler_runs
WHERE task_name = $1 AND status = 'succeeded' AND scheduled_at BETWEEN $2 AND $3
ORDER BY scheduled_at
