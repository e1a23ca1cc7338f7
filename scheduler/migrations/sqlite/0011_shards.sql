-- Sharded tasks: a task with `shards = N` has N rows, each locked, claimed and run on its own.
-- Shard 0 is the task's own row (`name`); shard i >= 1 is the row `name[i]`, whose `shard_of`
-- names the task. `shards` is the task's shard count as last reconciled (1: not sharded), kept
-- on every row of the task. A run records its task (the task's name, for every shard) and which
-- shard of how many it ran. Runs recorded before this migration are shard 0 of 1.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN shards INTEGER NOT NULL DEFAULT 1 CHECK (shards >= 1);
ALTER TABLE scheduler_tasks ADD COLUMN shard_of TEXT;
CREATE INDEX scheduler_tasks_shard_of_idx ON scheduler_tasks (shard_of) WHERE shard_of IS NOT NULL;
ALTER TABLE scheduler_runs ADD COLUMN shard_index INTEGER NOT NULL DEFAULT 0 CHECK (shard_index >= 0);
ALTER TABLE scheduler_runs ADD COLUMN shard_total INTEGER NOT NULL DEFAULT 1 CHECK (shard_total >= 1);
