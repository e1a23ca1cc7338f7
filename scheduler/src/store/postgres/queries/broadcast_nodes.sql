-- Record the nodes alive at broadcast ticks (see crate::shard), unless a claim recorded them
-- already; broadcast_nodes_read.sql reads them back (a statement of its own, so that it sees a
-- record another claim committed while this insert waited for it). $1 the rows the node rows
-- group under (a task's own, or an instance's `task/key`: the record's), $2 ticks, $4 their
-- tasks (parallel arrays), $3 the live window in ms. Alive at the tick: registers the task, not
-- stopped, a heartbeat within the window, registered at or before the tick, and its row of the
-- group (`name[@node]`) created before it (so it has the tick to run). Sorted by node id.
INSERT INTO scheduler_broadcast_ticks (task_name, tick, nodes)
SELECT a.grp, a.tick,
       ARRAY(SELECT n.node_id FROM scheduler_nodes AS n
             WHERE n.stopped_at IS NULL
               AND n.heartbeat_at >= now() - $3::int8 * interval '1 millisecond'
               AND a.task = ANY(n.tasks)
               AND n.started_at <= a.tick
               AND EXISTS (SELECT 1 FROM scheduler_tasks AS t
                           WHERE t.shard_of = a.grp AND t.node_pin = n.node_id
                             AND t.created_at < a.tick)
             ORDER BY n.node_id)
FROM unnest($1::text[], $2::timestamptz[], $4::text[]) AS a(grp, tick, task)
ON CONFLICT (task_name, tick) DO NOTHING
