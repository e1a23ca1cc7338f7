-- Every known node, with the runs whose lock it holds (counted on the locked rows' index: a
-- lock_owner is set exactly when a lock_token is).
SELECT n.node_id, n.hostname, n.pid, n.version, n.tasks, n.started_at, n.heartbeat_at,
       n.stopped_at, n.services_down, n.database_server,
       (SELECT count(*) FROM scheduler_tasks AS t WHERE t.lock_owner = n.node_id
                                                 AND t.lock_token IS NOT NULL) AS running
FROM scheduler_nodes AS n
ORDER BY n.node_id
