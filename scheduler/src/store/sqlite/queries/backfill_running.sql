-- The runs of backfill ?1 still running.
SELECT r.id
FROM scheduler_backfill_ticks AS bt
JOIN scheduler_runs AS r ON r.id = bt.run_id
WHERE bt.backfill_id = ?1 AND r.status = 'running'
ORDER BY r.id
