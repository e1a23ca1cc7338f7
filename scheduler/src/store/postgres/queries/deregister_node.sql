UPDATE scheduler_nodes SET stopped_at = now(), heartbeat_at = now() WHERE node_id = $1
