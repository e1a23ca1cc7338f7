-- The latest ?2 runs of each task of ?1 (a JSON array) started at or after ?3, newest first.
SELECT id, task_name, scheduled_at, started_at, finished_at, status, node_id, ticks_collapsed,
       error, attempt, trigger, triggered_by, cancel_requested_at, cancel_requested_by, shard_index, shard_total
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY task_name ORDER BY id DESC) AS n
    FROM scheduler_runs
    WHERE task_name IN (SELECT value FROM json_each(?1)) AND started_at >= ?3
)
WHERE n <= ?2
ORDER BY id DESC
