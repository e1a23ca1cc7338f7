-- Make instance row $1 a row of a task with shards (crate::shard): $2 the task's shard count,
-- $3 the instance's own row (`task/key`) that shard row `task/key[i]` groups under (NULL: the
-- instance's own row itself, shard 0).
UPDATE scheduler_tasks SET shards = $2, shard_of = $3 WHERE name = $1
