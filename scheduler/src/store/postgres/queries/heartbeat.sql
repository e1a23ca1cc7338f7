UPDATE scheduler_nodes SET heartbeat_at = now(), stopped_at = NULL WHERE node_id = $1
