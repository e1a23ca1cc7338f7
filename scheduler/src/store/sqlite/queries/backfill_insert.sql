-- Record a backfill: ?1 task, ?2 range start, ?3 range end, ?4 every tick?, ?5 cap on runs,
-- ?6 concurrency, ?7 pace (ms), ?8 who asked, ?9 now.
INSERT INTO scheduler_backfills (task_name, range_from, range_to, all_ticks, max_runs,
                                 concurrency, pace_ms, requested_by, requested_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
RETURNING id
