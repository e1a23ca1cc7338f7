-- Give enabled, unlocked tasks that have no next run the one the engine computed. Rows that got
-- a next run or a lock meanwhile are left alone. Returns the tasks rescheduled.
-- $1, $2, $3 parallel arrays: task, next run (its start), its tick when jitter shifted the start
-- off it (NULL: the start is the tick; see crate::ticks::jitter).
UPDATE scheduler_tasks AS t
SET next_run_at = r.next_run_at, next_tick = r.next_tick, updated_at = now()
FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) AS r(name, next_run_at, next_tick)
WHERE t.name = r.name AND t.enabled AND t.next_run_at IS NULL AND t.lock_token IS NULL
RETURNING t.name
