-- Broadcast tasks (`shards = "nodes"`, see crate::shard): each node registering the task has
-- its own row `name[@node]`, pinned to it by `node_pin` (only that node claims it); the task's
-- own row is pinned to no node (`node_pin = ''`: never claimed). NULL: any node may claim the
-- row, as before. A tick's nodes (those alive at it, sorted by id) are recorded once, by the
-- first claim of the tick, so every node's run of it agrees on its index and the total.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN node_pin text;
CREATE TABLE scheduler_broadcast_ticks (
    task_name  text NOT NULL,
    tick       timestamptz NOT NULL,
    nodes      text[] NOT NULL,
    decided_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_name, tick)
);
CREATE INDEX scheduler_broadcast_ticks_decided_idx ON scheduler_broadcast_ticks (decided_at);
