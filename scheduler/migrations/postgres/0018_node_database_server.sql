-- The database server a node's connections go to (`host:port`, never credentials), as the node
-- last reported it; NULL until it reports one. The node writes it when it changes (after a
-- failover or a switchover); `/api/nodes` shows it for every node.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_nodes ADD COLUMN database_server text;
