-- Record node ?1 (upsert). ?2 host, ?3 pid, ?4 version, ?5 task names (JSON array), ?6 now.
INSERT INTO scheduler_nodes (node_id, hostname, pid, version, tasks, started_at, heartbeat_at,
                             stopped_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, NULL)
ON CONFLICT (node_id) DO UPDATE
SET hostname = excluded.hostname, pid = excluded.pid, version = excluded.version,
    tasks = excluded.tasks, started_at = excluded.started_at,
    heartbeat_at = excluded.heartbeat_at, stopped_at = NULL, services_down = '',
    database_server = NULL
