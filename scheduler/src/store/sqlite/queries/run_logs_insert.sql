-- Append a log chunk of a run; a chunk already stored (same run and seq) is kept.
-- ?1 run id, ?2 seq, ?3 text, ?4 lines, ?5 truncated.
INSERT INTO scheduler_run_logs (run_id, seq, text, lines, truncated)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (run_id, seq) DO NOTHING
