-- Insert new task rows; a row that appeared meanwhile is left alone (never overwritten). A first
-- run shifted by jitter keeps its tick in next_tick (NULL: the first run is the tick).
INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at, disabled_at, calendar,
                             next_tick)
SELECT name, cron, timezone, enabled, next_run_at, CASE WHEN enabled THEN NULL ELSE now() END,
       calendar, next_tick
FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::timestamptz[], $6::text[],
            $7::timestamptz[])
     AS c(name, cron, timezone, enabled, next_run_at, calendar, next_tick)
ON CONFLICT (name) DO NOTHING
