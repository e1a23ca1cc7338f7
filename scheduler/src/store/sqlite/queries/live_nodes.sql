-- How many nodes other than ?1 are live: not stopped, a heartbeat since ?2.
SELECT count(*) FROM scheduler_nodes
WHERE stopped_at IS NULL
  AND node_id <> ?1
  AND heartbeat_at >= ?2
