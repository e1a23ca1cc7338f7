-- Append log chunks of runs. $1.. parallel arrays: run id, seq, text, lines, truncated.
INSERT INTO scheduler_run_logs (run_id, seq, text, lines, truncated)
SELECT * FROM unnest($1::int8[], $2::int4[], $3::text[], $4::int4[], $5::bool[])
ON CONFLICT (run_id, seq) DO NOTHING
