-- Runs started at or after ?4 (not NULL) matching the other filters, newest first: the window
-- on (started_at), sorted (named: left to itself, SQLite scans the rowid to avoid the sort).
-- ?1 task, ?2 status, ?3 trigger, ?4 started at or after, ?5 started before, ?6 id below, ?8 instance key;
-- at most ?7. One file per leading filter (see `runs_impl`): SQLite cannot use an index for a
-- term written `(?1 IS NULL OR task_name = ?1)`, so the filter that picks the index is written
-- plainly, and the cursor as a bound on the rowid.
SELECT
    -- @include run_columns.sql
FROM scheduler_runs INDEXED BY scheduler_runs_started_idx
WHERE (?1 IS NULL OR task_name = ?1)
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR trigger = ?3)
  AND started_at >= ?4
  AND started_at < coalesce(?5, 9223372036854775807)
  AND id < coalesce(?6, 9223372036854775807)
  AND (?8 IS NULL OR instance_key = ?8)
ORDER BY id DESC
LIMIT ?7
