-- For a shard (row ?1 of task ?2, grouped under row ?6; ?7 the instance's key, NULL for a
-- task's own shards) about to run tick ?3, what the spread and overlap rules need (see
-- crate::shard): `behind`, whether another shard of the group is still on an earlier tick
-- (running it, waiting for its retry, or not yet claimed); `mine`, the runs of the tick node ?4
-- has had (any shard of the group, any status); `others`, how many other live nodes register
-- the task (not stopped, a heartbeat since ?5); `rank`, how many of them sort before node ?4 by
-- id; and `started`, how many of the tick's shards have a run (any node). An instance's shards
-- (`task/key[i]`, grouped under `task/key`) are a group of their own, apart from their task's
-- and the other instances'; their runs are told apart by the key they record.
SELECT EXISTS (
           SELECT 1 FROM scheduler_tasks AS o
           WHERE (o.name = ?6 OR o.shard_of = ?6) AND o.name <> ?1 AND o.enabled = 1
             AND ((o.lock_token IS NOT NULL
                   AND EXISTS (SELECT 1 FROM scheduler_runs AS r
                               WHERE r.lock_token = o.lock_token AND r.status = 'running'
                                 AND r.scheduled_at < ?3))
                  OR o.retry_tick < ?3
                  OR (o.paused_at IS NULL AND o.next_run_at < ?3))
       ) AS behind,
       (SELECT count(*) FROM scheduler_runs AS r
        WHERE r.task_name = ?2 AND r.scheduled_at = ?3 AND r.node_id = ?4
          AND r.instance_key IS ?7) AS mine,
       (SELECT count(*) FROM scheduler_nodes AS n
        WHERE n.node_id <> ?4 AND n.stopped_at IS NULL AND n.heartbeat_at >= ?5
          AND EXISTS (SELECT 1 FROM json_each(n.tasks) WHERE value = ?2)) AS others,
       (SELECT count(*) FROM scheduler_nodes AS n
        WHERE n.node_id < ?4 AND n.stopped_at IS NULL AND n.heartbeat_at >= ?5
          AND EXISTS (SELECT 1 FROM json_each(n.tasks) WHERE value = ?2)) AS rank,
       (SELECT count(DISTINCT r.shard_index) FROM scheduler_runs AS r
        WHERE r.task_name = ?2 AND r.scheduled_at = ?3 AND r.instance_key IS ?7) AS started
