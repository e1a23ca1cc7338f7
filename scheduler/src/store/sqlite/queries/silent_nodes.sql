-- The nodes other than ?1 that went silent (no heartbeat since ?2) without stopping cleanly.
SELECT node_id FROM scheduler_nodes
WHERE stopped_at IS NULL
  AND node_id <> ?1
  AND heartbeat_at < ?2
ORDER BY node_id
