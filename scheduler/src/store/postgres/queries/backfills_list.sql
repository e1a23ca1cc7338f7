-- The newest $2 backfills (of task $1, or of every task when NULL; $3: only this id, when not
-- NULL), newest first, with their ticks counted by their runs' statuses (a run pruned from
-- history counts as ended otherwise).
SELECT b.id, b.task_name, b.range_from, b.range_to, b.all_ticks, b.max_runs, b.concurrency,
       b.pace_ms, b.requested_by, b.requested_at, b.cancelled_at, b.cancelled_by,
       count(bt.tick) AS total,
       count(*) FILTER (WHERE bt.tick IS NOT NULL AND bt.run_id IS NULL) AS unrun,
       count(*) FILTER (WHERE r.status = 'running') AS running,
       count(*) FILTER (WHERE r.status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE bt.run_id IS NOT NULL
                        AND (r.status IS NULL OR r.status NOT IN ('running', 'succeeded')))
           AS failed
FROM scheduler_backfills AS b
LEFT JOIN scheduler_backfill_ticks AS bt ON bt.backfill_id = b.id
LEFT JOIN scheduler_runs AS r ON r.id = bt.run_id
WHERE ($1::text IS NULL OR b.task_name = $1) AND ($3::int8 IS NULL OR b.id = $3)
GROUP BY b.id
ORDER BY b.id DESC
LIMIT $2
