-- Apply the engine's skip decisions on rows selected by claim_select (same transaction): move
-- the schedule, drop the pending retry, end an expired pause. The skipped ticks are recorded
-- by skips_insert in the same transaction. A row waiting for its limit waits no more.
-- $1.. parallel arrays: name, set next run?, next_run_at, clear retry?, clear pause?, clear the
-- manual run? (a broadcast task's own row, which never runs it), next_tick (the next run's tick
-- when jitter shifted its start)
UPDATE scheduler_tasks AS t
SET next_run_at = CASE WHEN s.set_next THEN s.next_run_at ELSE t.next_run_at END,
    next_tick = CASE WHEN s.set_next THEN s.next_tick ELSE t.next_tick END,
    retry_at = CASE WHEN s.clear_retry THEN NULL ELSE t.retry_at END,
    retry_tick = CASE WHEN s.clear_retry THEN NULL ELSE t.retry_tick END,
    retry_attempt = CASE WHEN s.clear_retry THEN NULL ELSE t.retry_attempt END,
    paused_at = CASE WHEN s.clear_pause THEN NULL ELSE t.paused_at END,
    paused_by = CASE WHEN s.clear_pause THEN NULL ELSE t.paused_by END,
    pause_reason = CASE WHEN s.clear_pause THEN NULL ELSE t.pause_reason END,
    pause_until = CASE WHEN s.clear_pause THEN NULL ELSE t.pause_until END,
    manual_at = CASE WHEN s.clear_manual THEN NULL ELSE t.manual_at END,
    manual_by = CASE WHEN s.clear_manual THEN NULL ELSE t.manual_by END,
    limit_waiting_since = NULL,
    updated_at = now()
FROM unnest($1::text[], $2::bool[], $3::timestamptz[], $4::bool[], $5::bool[], $6::bool[],
            $7::timestamptz[])
     AS s(name, set_next, next_run_at, clear_retry, clear_pause, clear_manual, next_tick)
WHERE t.name = s.name AND t.lock_token IS NULL
