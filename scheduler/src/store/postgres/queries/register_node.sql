INSERT INTO scheduler_nodes (node_id, hostname, pid, version, tasks)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (node_id) DO UPDATE
SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, version = EXCLUDED.version,
    tasks = EXCLUDED.tasks, started_at = now(), heartbeat_at = now(), stopped_at = NULL,
    services_down = '', database_server = NULL
