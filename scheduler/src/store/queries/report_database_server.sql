-- Record the database server node $1's connections go to ($2: `host:port`, or NULL; always NULL
-- on SQLite, which has none).
UPDATE scheduler_nodes SET database_server = $2 WHERE node_id = $1
