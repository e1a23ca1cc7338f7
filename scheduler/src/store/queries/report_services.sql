-- Record which background services of node $1 are not running ($2: names, comma-separated).
UPDATE scheduler_nodes SET services_down = $2 WHERE node_id = $1
