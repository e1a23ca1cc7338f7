SELECT run_id, seq, text, lines, truncated FROM scheduler_run_logs WHERE run_id = $1 ORDER BY seq
