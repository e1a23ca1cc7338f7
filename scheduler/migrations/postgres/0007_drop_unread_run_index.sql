-- The run history's index by task and scheduled time (0001) is read by no query: runs of a
-- task are paged by (task_name, id DESC) (0004). Every run's start wrote an entry into it, and
-- so did its end (a finish changes indexed columns, so it is not a heap-only update): one
-- random page per task per claim, 1,000 entries per claim of 1,000 runs.
-- Never edit a migration after it has landed.
DROP INDEX IF EXISTS scheduler_runs_task_idx;
