-- Task ?1's own row, as an upsert of one of its instances decides on it (the write transaction
-- holds it).
SELECT enabled, shards, node_pin
FROM scheduler_tasks
WHERE name = ?1 AND instance_of IS NULL
