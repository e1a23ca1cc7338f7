-- Insert a new task row; a row that exists is left alone (never overwritten). ?1 name, ?2 cron,
-- ?3 zone, ?4 enabled, ?5 first run (its start), ?6 now, ?7 calendar, ?8 the tick ?5 starts when
-- jitter shifted it (NULL: ?5 is the tick). A disabled task is disabled since now.
INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at, disabled_at, created_at,
                             updated_at, calendar, next_tick)
VALUES (?1, ?2, ?3, ?4, ?5, CASE WHEN ?4 THEN NULL ELSE ?6 END, ?6, ?6, ?7, ?8)
ON CONFLICT (name) DO NOTHING
