-- For each shard about to run a tick (parallel arrays: $1 the shard's row, $2 its task, $3 the
-- tick), what the spread and overlap rules need (see crate::shard): `behind`, whether another
-- shard of the task is still on an earlier tick (running it, waiting for its retry, or not yet
-- claimed); `mine`, the runs of the tick node $4 has had (any shard, any status); `others`,
-- how many other live nodes register the task (not stopped, a heartbeat within $5 ms);
-- `rank`, how many of them sort before node $4 by id; and `started`, how many of the tick's
-- shards have a run (any node). In the order given.
SELECT s.ord,
       EXISTS (
           SELECT 1 FROM scheduler_tasks AS o
           WHERE (o.name = s.task OR o.shard_of = s.task) AND o.name <> s.shard_row AND o.enabled
             AND ((o.lock_token IS NOT NULL
                   AND EXISTS (SELECT 1 FROM scheduler_runs AS r
                               WHERE r.lock_token = o.lock_token AND r.status = 'running'
                                 AND r.scheduled_at < s.tick))
                  OR o.retry_tick < s.tick
                  OR (o.paused_at IS NULL AND o.next_run_at < s.tick))
       ) AS behind,
       (SELECT count(*) FROM scheduler_runs AS r
        WHERE r.task_name = s.task AND r.scheduled_at = s.tick AND r.node_id = $4) AS mine,
       (SELECT count(*) FROM scheduler_nodes AS n
        WHERE n.node_id <> $4 AND n.stopped_at IS NULL
          AND n.heartbeat_at >= now() - $5 * interval '1 millisecond'
          AND s.task = ANY(n.tasks)) AS others,
       (SELECT count(*) FROM scheduler_nodes AS n
        WHERE n.node_id < $4 AND n.stopped_at IS NULL
          AND n.heartbeat_at >= now() - $5 * interval '1 millisecond'
          AND s.task = ANY(n.tasks)) AS rank,
       (SELECT count(DISTINCT r.shard_index) FROM scheduler_runs AS r
        WHERE r.task_name = s.task AND r.scheduled_at = s.tick) AS started
FROM unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS s(shard_row, task, tick, ord)
ORDER BY s.ord
