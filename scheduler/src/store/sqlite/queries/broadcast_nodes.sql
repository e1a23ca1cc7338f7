-- The nodes alive at broadcast tick ?2 of the rows grouped under ?1 (a task's own row, or an
-- instance's `task/key`: the record's) of task ?5 (see crate::shard), recorded by the first
-- claim that asks (no row yet) and read back by every later one: ?3 now, ?4 the oldest live
-- heartbeat. Alive at the tick: registers the task, not stopped, a heartbeat since ?4,
-- registered at or before the tick, and its row of the group (`name[@node]`) created before it.
-- Sorted by node id. The claim's transaction holds the write lock: no other claim interleaves.
INSERT INTO scheduler_broadcast_ticks (task_name, tick, nodes, decided_at)
SELECT ?1, ?2,
       (SELECT json_group_array(node_id) FROM (
            SELECT n.node_id FROM scheduler_nodes AS n
            WHERE n.stopped_at IS NULL AND n.heartbeat_at >= ?4
              AND EXISTS (SELECT 1 FROM json_each(n.tasks) WHERE value = ?5)
              AND n.started_at <= ?2
              AND EXISTS (SELECT 1 FROM scheduler_tasks AS t
                          WHERE t.shard_of = ?1 AND t.node_pin = n.node_id
                            AND t.created_at < ?2)
            ORDER BY n.node_id)),
       ?3
WHERE true
ON CONFLICT (task_name, tick) DO NOTHING
