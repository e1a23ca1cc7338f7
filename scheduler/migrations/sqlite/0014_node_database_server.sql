-- The database server a node's connections go to, as the node last reported it. An SQLite
-- store has no server: the column stays NULL (it is there so both backends keep the same
-- records; on PostgreSQL it holds `host:port`).
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_nodes ADD COLUMN database_server TEXT;
