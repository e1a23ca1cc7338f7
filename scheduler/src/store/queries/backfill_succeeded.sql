-- The ticks of task $1 in [$2, $3] every shard of which has a succeeded run (any trigger), in
-- order: of its instance $4 (NULL: of the task itself, not of its instances). A tick of a task
-- with N shards counts once a run of each of its N shards succeeded.
SELECT scheduled_at
FROM scheduler_runs
WHERE task_name = $1 AND status = 'succeeded' AND scheduled_at BETWEEN $2 AND $3
  AND coalesce(instance_key, '') = coalesce($4, '')
GROUP BY scheduled_at
HAVING count(DISTINCT shard_index) >= max(shard_total)
ORDER BY scheduled_at
