-- Instance rows $2 of task $1 were just written, with their shard or node rows (`shard_of`;
-- crate::store::writes): `mine`, the earliest of them a node would wake for (enabled, unpaused,
-- unlocked), and `others`, the earliest of the task's other rows that every node running the
-- task waits for (the same, due after now and no later than `mine`, pinned to no node), looked
-- for among the 100 rows due next after now only (in the order of the next-run index: a bounded
-- read however many rows the table holds; none found there reads as none). The engine decides
-- from the two whether the nodes must be told now.
WITH mine AS (
    SELECT min(next_run_at) AS due FROM scheduler_tasks
    WHERE (name = ANY($2) OR shard_of = ANY($2)) AND enabled AND paused_at IS NULL
      AND lock_token IS NULL
), nearest AS (
    SELECT name, instance_of, shard_of, node_pin, next_run_at, paused_at, lock_token
    FROM scheduler_tasks
    WHERE enabled AND next_run_at > now()
    ORDER BY next_run_at LIMIT 100
)
SELECT (SELECT due FROM mine) AS mine,
       (SELECT min(next_run_at) FROM nearest
        WHERE paused_at IS NULL AND lock_token IS NULL
          AND (instance_of = $1 OR name = $1 OR shard_of = $1) AND NOT (name = ANY($2))
          AND (shard_of IS NULL OR NOT (shard_of = ANY($2)))
          AND (node_pin IS NULL OR node_pin = '')
          AND next_run_at <= (SELECT due FROM mine)) AS others
