-- The nodes a broadcast instance of task ?1 (its own row ?2) has a row for (`task/key[@node]`):
-- every node registering the task and not stopped, and every node it has a row for already (a
-- node stopped now keeps its row, changed with the instance). A node that starts later has its
-- reconcile make its own.
SELECT n.node_id FROM scheduler_nodes AS n
WHERE n.stopped_at IS NULL AND EXISTS (SELECT 1 FROM json_each(n.tasks) WHERE value = ?1)
UNION
SELECT node_pin AS node_id FROM scheduler_tasks
WHERE shard_of = ?2 AND node_pin IS NOT NULL AND node_pin <> ''
