-- Record the database server node ?1's connections go to (?2: NULL on SQLite, which has none).
UPDATE scheduler_nodes SET database_server = ?2 WHERE node_id = ?1
