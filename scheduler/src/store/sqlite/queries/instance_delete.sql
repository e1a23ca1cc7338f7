-- Delete instance row ?1 and its shard rows (`?1[i]`, whose shard_of it is; never one the config owns) unless a run of it holds its lock (or it is removed already).
DELETE FROM scheduler_tasks
WHERE (name = ?1 OR shard_of = ?1) AND instance_of IS NOT NULL AND coalesce(instance_source, 'runtime') <> 'config'
  AND removed_at IS NULL AND lock_token IS NULL
