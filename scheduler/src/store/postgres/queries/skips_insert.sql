-- Record ranges of ticks that did not get a run of their own.
-- $1.. parallel arrays: task, reason, first tick, last tick, ticks, exact, run id.
INSERT INTO scheduler_skips (task_name, reason, first_tick, last_tick, ticks, exact, run_id)
SELECT *
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::int8[],
            $6::bool[], $7::int8[])
