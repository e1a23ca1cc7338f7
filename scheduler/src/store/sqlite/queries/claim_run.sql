-- Record the running run of a lock just taken. ?1 task (a shard's run is recorded under its
-- task's name), ?2 tick served, ?3 its start (now, or the tick if claimed ahead of it), ?4 node,
-- ?5 token, ?6 recovery, ?7 attempt, ?8 trigger, ?9 who asked, ?10 its fencing token, ?11 its
-- shard index, ?12 the task's shard count, ?13 the instance's key (NULL: the task's own run),
-- ?14 the arguments a manual run was asked with in place of its row's own (NULL: none).
INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, status, node_id, lock_token,
                            recovery, attempt, trigger, triggered_by, fencing_token, shard_index,
                            shard_total, instance_key, args_override)
VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
RETURNING id
