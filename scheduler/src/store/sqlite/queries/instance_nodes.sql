-- The nodes registering task ?1 and not stopped: a broadcast instance of the task gets a row
-- for each (`task/key[@node]`); a node that starts later has its reconcile make its own.
SELECT node_id FROM scheduler_nodes AS n
WHERE n.stopped_at IS NULL AND EXISTS (SELECT 1 FROM json_each(n.tasks) WHERE value = ?1)
