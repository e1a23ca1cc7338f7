-- Take the locks planned for the rows selected by claim_select (same transaction), move each
-- row's schedule as planned, clear what the run serves (its retry, its manual request, an open
-- missed-run incident), make the run's start the row's last start (keeping the one it replaces
-- for a run handed back before it started: release_requeue.sql), and record one running run per
-- task. A run whose tick was claimed ahead starts on its tick (a jittered tick: on its start):
-- that is its start; the store's clock at the end is returned so the node can tell how long
-- until then. Each lock taken moves the task's fence on by one: the run's fencing token. An
-- instance's run (row `task/key`) records the row's key; a manual run records the arguments it
-- was asked with in place of its row's own (taken with the manual request).
-- $1 node id; $2.. parallel arrays: name, token, scheduled_at, set next run?, next_run_at,
-- recovery, lock lifetime in ms, trigger, attempt, triggered_by, clear retry?, the task (a
-- shard's run is recorded under its task's name), shard index, shard total, args override,
-- next_tick (the next run's tick when jitter shifted its start, see crate::ticks::jitter),
-- starts_at (when the run is due to start: its tick, or its jittered start), the limit the lock holds
-- (crate::limits; NULL: none).
WITH plan AS (
    SELECT *
    FROM unnest($2::text[], $3::uuid[], $4::timestamptz[], $5::bool[], $6::timestamptz[],
                $7::text[], $8::int8[], $9::text[], $10::int4[], $11::text[], $12::bool[],
                $13::text[], $14::int4[], $15::int4[], $16::text[], $17::timestamptz[],
                $18::timestamptz[], $19::text[])
         AS p(name, token, scheduled_at, set_next, next_run_at, recovery, lock_ms, trigger,
              attempt, triggered_by, clear_retry, task, shard_index, shard_total, args_override,
              next_tick, starts_at, limit_held)
), locked AS (
    UPDATE scheduler_tasks AS t
    SET lock_owner = $1,
        lock_token = p.token,
        lock_expires_at = clock_timestamp() + p.lock_ms * interval '1 millisecond',
        next_run_at = CASE WHEN p.set_next THEN p.next_run_at ELSE t.next_run_at END,
        next_tick = CASE WHEN p.set_next THEN p.next_tick ELSE t.next_tick END,
        last_scheduled_at = CASE WHEN p.trigger = 'schedule' THEN p.scheduled_at
                                 ELSE t.last_scheduled_at END,
        retry_at = CASE WHEN p.clear_retry THEN NULL ELSE t.retry_at END,
        retry_tick = CASE WHEN p.clear_retry THEN NULL ELSE t.retry_tick END,
        retry_attempt = CASE WHEN p.clear_retry THEN NULL ELSE t.retry_attempt END,
        manual_at = CASE WHEN p.trigger = 'manual' THEN NULL ELSE t.manual_at END,
        manual_by = CASE WHEN p.trigger = 'manual' THEN NULL ELSE t.manual_by END,
        manual_args = CASE WHEN p.trigger = 'manual' THEN NULL ELSE t.manual_args END,
        missed_since = NULL,
        limit_held = p.limit_held,
        limit_waiting_since = NULL,
        fence = t.fence + 1,
        prior_run_at = t.last_run_at,
        last_run_at = GREATEST(clock_timestamp(), p.starts_at),
        updated_at = now()
    FROM plan AS p
    WHERE t.name = p.name AND t.lock_token IS NULL
    RETURNING t.name, t.fence, t.instance_key
)
INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, status, node_id, lock_token,
                            recovery, attempt, trigger, triggered_by, fencing_token, shard_index,
                            shard_total, instance_key, args_override)
SELECT p.task, p.scheduled_at, GREATEST(clock_timestamp(), p.starts_at), 'running', $1, p.token, p.recovery,
       p.attempt, p.trigger, p.triggered_by, l.fence, p.shard_index, p.shard_total, l.instance_key,
       p.args_override
FROM plan AS p
JOIN locked AS l ON l.name = p.name
RETURNING id, task_name, shard_index, shard_total, lock_token, scheduled_at, started_at, attempt, trigger, triggered_by,
          fencing_token, clock_timestamp() AS written_at
