-- The newest ?2 backfills (of task ?1, or of every task when NULL), newest first, with their
-- ticks counted by their runs' statuses (a run pruned from history counts as ended otherwise).
-- ?3: one backfill's id (NULL: any).
SELECT b.id, b.task_name, b.range_from, b.range_to, b.all_ticks, b.max_runs, b.concurrency,
       b.pace_ms, b.requested_by, b.requested_at, b.cancelled_at, b.cancelled_by,
       count(bt.tick) AS total,
       sum(CASE WHEN bt.run_id IS NULL THEN 1 ELSE 0 END) AS unrun,
       sum(CASE WHEN r.status = 'running' THEN 1 ELSE 0 END) AS running,
       sum(CASE WHEN r.status = 'succeeded' THEN 1 ELSE 0 END) AS succeeded,
       sum(CASE WHEN bt.run_id IS NOT NULL AND (r.status IS NULL
                OR r.status NOT IN ('running', 'succeeded')) THEN 1 ELSE 0 END) AS failed
FROM scheduler_backfills AS b
LEFT JOIN scheduler_backfill_ticks AS bt ON bt.backfill_id = b.id
LEFT JOIN scheduler_runs AS r ON r.id = bt.run_id
WHERE (?1 IS NULL OR b.task_name = ?1) AND (?3 IS NULL OR b.id = ?3)
GROUP BY b.id
ORDER BY b.id DESC
LIMIT ?2
