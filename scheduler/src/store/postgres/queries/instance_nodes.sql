-- The nodes registering task $1 and not stopped: a broadcast instance of the task gets a row
-- for each (`task/key[@node]`); a node that starts later has its reconcile make its own.
SELECT node_id FROM scheduler_nodes WHERE stopped_at IS NULL AND $1 = ANY(tasks)
