-- Ask for a manual run of task $1 by $2, with the arguments $3 in place of the row's own (NULL:
-- its own), unless one is queued or the task is paused. Returns the task's pause and whether the
-- request was queued now (no row: no such task). A sharded task's shards (rows `$1[i]`) each
-- get one.
WITH task AS (
    SELECT name, manual_at, paused_at, paused_by, pause_reason, pause_until
    FROM scheduler_tasks WHERE name = $1 FOR UPDATE
), queued AS (
    UPDATE scheduler_tasks AS t
    SET manual_at = now(), manual_by = $2, manual_args = $3, updated_at = now()
    FROM task
    WHERE (t.name = task.name OR t.shard_of = task.name)
      AND task.manual_at IS NULL AND task.paused_at IS NULL AND t.manual_at IS NULL
    RETURNING t.name
)
SELECT task.manual_at IS NOT NULL AS already, task.paused_at, task.paused_by, task.pause_reason,
       task.pause_until, (SELECT count(*) FROM queued WHERE queued.name = task.name) > 0 AS queued
FROM task
