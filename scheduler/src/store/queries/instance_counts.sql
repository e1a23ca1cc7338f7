-- How many instances each task has (removed ones left out; an instance's shard rows
-- are one instance).
SELECT instance_of AS task, count(*) AS instances
FROM scheduler_tasks
WHERE instance_of IS NOT NULL AND removed_at IS NULL AND shard_of IS NULL
GROUP BY instance_of
