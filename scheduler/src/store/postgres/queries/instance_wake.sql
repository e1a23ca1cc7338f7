-- Instance rows $2 of task $1 were just written (crate::store::writes): the earliest of them a
-- node would wake for (enabled, unpaused, unlocked), and the earliest of the task's other rows
-- that every node running the task waits for (the same, due after now, pinned to no node). The
-- engine decides from the two whether the nodes must be told now.
SELECT (SELECT min(next_run_at) FROM scheduler_tasks
        WHERE name = ANY($2) AND enabled AND paused_at IS NULL AND lock_token IS NULL) AS mine,
       (SELECT next_run_at FROM scheduler_tasks
        WHERE enabled AND next_run_at > now() AND paused_at IS NULL AND lock_token IS NULL
          AND (instance_of = $1 OR name = $1 OR shard_of = $1) AND NOT (name = ANY($2))
          AND (node_pin IS NULL OR node_pin = '')
        ORDER BY next_run_at LIMIT 1) AS others
