-- Insert new task rows; a row that appeared meanwhile is left alone (never overwritten).
INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::timestamptz[])
ON CONFLICT (name) DO NOTHING
