-- Runs of task ?1's instance ?8 (neither NULL) matching the other filters, newest first:
-- (task_name, instance_key, id DESC). ?2 status, ?3 trigger, ?4 started at or after, ?5 started
-- before, ?6 id below; at most ?7 (see `runs_by_task.sql`).
SELECT
    -- @include run_columns.sql
FROM scheduler_runs
WHERE task_name = ?1 AND instance_key = ?8
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR trigger = ?3)
  AND (?4 IS NULL OR started_at >= ?4)
  AND (?5 IS NULL OR started_at < ?5)
  AND id < coalesce(?6, 9223372036854775807)
ORDER BY id DESC
LIMIT ?7
