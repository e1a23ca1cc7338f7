-- The latest $2 runs of each task of $1 started at or after $3, newest first (an index scan
-- of (task_name, id) per task).
SELECT r.id, r.task_name, r.scheduled_at, r.started_at, r.finished_at, r.status, r.node_id,
       r.ticks_collapsed::int8 AS ticks_collapsed, r.error, r.attempt, r.trigger, r.triggered_by,
       r.cancel_requested_at, r.cancel_requested_by, r.shard_index, r.shard_total
FROM unnest($1::text[]) AS t(name)
CROSS JOIN LATERAL (
    SELECT * FROM scheduler_runs
    WHERE task_name = t.name AND started_at >= $3
    ORDER BY id DESC
    LIMIT $2
) AS r
ORDER BY r.id DESC
