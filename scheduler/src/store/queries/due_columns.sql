    name, cron, timezone,
    -- Its calendar: the row's own, else (an instance) its task's.
    coalesce(task.calendar,
             CASE WHEN task.instance_of IS NOT NULL
                  THEN (SELECT o.calendar FROM scheduler_tasks AS o
                        WHERE o.name = task.instance_of) END) AS calendar,
    enabled, next_run_at, last_scheduled_at, last_finished_at,
    retry_at, retry_tick, retry_attempt, manual_at, manual_by,
    paused_at, paused_by, pause_reason, pause_until, missed_since, backfill_id, backfill_at,
    (SELECT min(bt.tick) FROM scheduler_backfill_ticks AS bt
     WHERE bt.backfill_id = task.backfill_id AND bt.row_name = task.name
       AND bt.run_id IS NULL) AS backfill_tick,
    (SELECT b.requested_by FROM scheduler_backfills AS b
     WHERE b.id = task.backfill_id) AS backfill_by,
    shards, node_pin, args, manual_args, next_tick, jitter_ms, limit_waiting_since, owners, labels, sla,
    -- The limit its runs hold: the row's own, else (an instance) its task's.
    coalesce(task.limit_name,
             CASE WHEN task.instance_of IS NOT NULL
                  THEN (SELECT o.limit_name FROM scheduler_tasks AS o
                        WHERE o.name = task.instance_of) END) AS limit_name
