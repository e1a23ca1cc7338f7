-- Make instance row ?1 a row of a task with shards or a broadcast task (crate::shard): ?2 the
-- task's shard count (1 for a broadcast), ?3 the instance's own row (`task/key`) that shard row
-- `task/key[i]` or node row `task/key[@node]` groups under (NULL: the instance's own row
-- itself), ?4 the node the row is pinned to (a broadcast instance's node rows; '' for its own
-- row, pinned to no node; NULL: any node).
UPDATE scheduler_tasks SET shards = ?2, shard_of = ?3, node_pin = ?4 WHERE name = ?1
