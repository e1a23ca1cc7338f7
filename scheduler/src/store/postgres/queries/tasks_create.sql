-- Insert new task rows; a row that appeared meanwhile is left alone (never overwritten).
INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at, disabled_at, calendar)
SELECT name, cron, timezone, enabled, next_run_at, CASE WHEN enabled THEN NULL ELSE now() END,
       calendar
FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::timestamptz[], $6::text[])
     AS c(name, cron, timezone, enabled, next_run_at, calendar)
ON CONFLICT (name) DO NOTHING
