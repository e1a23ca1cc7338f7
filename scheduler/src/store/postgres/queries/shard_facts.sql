-- For each shard about to run a tick (parallel arrays: $1 the shard's row, $2 its task, $3 the
-- tick, $6 the row its shards group under, $7 the instance's key, NULL for a task's own
-- shards), what the spread and overlap rules need (see crate::shard): `behind`, whether another
-- shard of the group is still on an earlier tick (running it, waiting for its retry, or not yet
-- claimed); `mine`, the runs of the tick node $4 has had (any shard of the group, any status);
-- `others`, how many other live nodes register the task (not stopped, a heartbeat within $5
-- ms); `rank`, how many of them sort before node $4 by id; and `started`, how many of the
-- tick's shards have a run (any node). An instance's shards (`task/key[i]`, grouped under
-- `task/key`) are a group of their own, apart from their task's and the other instances'; their
-- runs are told apart by the key they record. In the order given.
SELECT s.ord,
       EXISTS (
           SELECT 1 FROM scheduler_tasks AS o
           WHERE (o.name = s.grp OR o.shard_of = s.grp) AND o.name <> s.shard_row AND o.enabled
             AND ((o.lock_token IS NOT NULL
                   AND EXISTS (SELECT 1 FROM scheduler_runs AS r
                               WHERE r.lock_token = o.lock_token AND r.status = 'running'
                                 AND r.scheduled_at < s.tick))
                  OR o.retry_tick < s.tick
                  OR (o.paused_at IS NULL AND o.next_run_at < s.tick))
       ) AS behind,
       (SELECT count(*) FROM scheduler_runs AS r
        WHERE r.task_name = s.task AND r.scheduled_at = s.tick AND r.node_id = $4
          AND r.instance_key IS NOT DISTINCT FROM s.ikey) AS mine,
       (SELECT count(*) FROM scheduler_nodes AS n
        WHERE n.node_id <> $4 AND n.stopped_at IS NULL
          AND n.heartbeat_at >= now() - $5 * interval '1 millisecond'
          AND s.task = ANY(n.tasks)) AS others,
       (SELECT count(*) FROM scheduler_nodes AS n
        WHERE n.node_id < $4 AND n.stopped_at IS NULL
          AND n.heartbeat_at >= now() - $5 * interval '1 millisecond'
          AND s.task = ANY(n.tasks)) AS rank,
       (SELECT count(DISTINCT r.shard_index) FROM scheduler_runs AS r
        WHERE r.task_name = s.task AND r.scheduled_at = s.tick
          AND r.instance_key IS NOT DISTINCT FROM s.ikey) AS started
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $6::text[], $7::text[])
     WITH ORDINALITY AS s(shard_row, task, tick, grp, ikey, ord)
ORDER BY s.ord
