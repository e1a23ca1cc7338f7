-- Every known node, with the runs whose lock it holds.
SELECT n.node_id, n.hostname, n.pid, n.version, n.tasks, n.started_at, n.heartbeat_at,
       n.stopped_at, n.services_down, n.database_server,
       (SELECT count(*) FROM scheduler_tasks AS t WHERE t.lock_owner = n.node_id) AS running
FROM scheduler_nodes AS n
ORDER BY n.node_id
