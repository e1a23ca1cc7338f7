-- Mark node ?1 stopped at ?2 (now).
UPDATE scheduler_nodes SET stopped_at = ?2, heartbeat_at = ?2 WHERE node_id = ?1
