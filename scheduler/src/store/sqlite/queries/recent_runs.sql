-- The latest ?2 runs of task ?1 (of every task when NULL), newest first.
SELECT id, task_name, scheduled_at, started_at, finished_at, status, node_id, ticks_collapsed,
       error, attempt, trigger, triggered_by, cancel_requested_at, cancel_requested_by, shard_index, shard_total
FROM scheduler_runs
WHERE ?1 IS NULL OR task_name = ?1
ORDER BY id DESC
LIMIT ?2
