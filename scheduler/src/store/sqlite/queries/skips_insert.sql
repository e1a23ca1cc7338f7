-- Record a range of ticks that did not get a run of their own. ?1 task, ?2 reason, ?3 first
-- tick, ?4 last tick, ?5 ticks, ?6 exact, ?7 run id, ?8 now.
INSERT INTO scheduler_skips (task_name, reason, first_tick, last_tick, ticks, exact, run_id,
                             recorded_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
