-- Refresh node ?1's heartbeat at ?2 (now); the rows changed say whether its row exists.
UPDATE scheduler_nodes SET heartbeat_at = ?2, stopped_at = NULL WHERE node_id = ?1
