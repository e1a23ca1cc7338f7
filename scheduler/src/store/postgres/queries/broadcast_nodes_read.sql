-- The nodes recorded alive at broadcast ticks ($1 the rows the node rows group under, a task's
-- or an instance's, $2 ticks: parallel arrays; see broadcast_nodes.sql).
SELECT b.task_name AS task, b.tick, b.nodes
FROM scheduler_broadcast_ticks AS b
JOIN unnest($1::text[], $2::timestamptz[]) AS a(task, tick)
  ON b.task_name = a.task AND b.tick = a.tick
