-- Runs matching the filters (each NULL: any), newest first, at most ?7.
-- ?1 task, ?2 status, ?3 trigger, ?4 started at or after, ?5 started before, ?6 id below.
SELECT id, task_name, scheduled_at, started_at, finished_at, status, node_id, ticks_collapsed,
       error, attempt, trigger, triggered_by
FROM scheduler_runs
WHERE (?1 IS NULL OR task_name = ?1)
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR trigger = ?3)
  AND (?4 IS NULL OR started_at >= ?4)
  AND (?5 IS NULL OR started_at < ?5)
  AND (?6 IS NULL OR id < ?6)
ORDER BY id DESC
LIMIT ?7
