-- Backfill $1's ticks in order (a tick of a task with shards once per row, by row: the caller
-- names each entry's shard from its row), each with the run that served it and its status.
SELECT bt.tick, bt.row_name, bt.run_id, r.status
FROM scheduler_backfill_ticks AS bt
LEFT JOIN scheduler_runs AS r ON r.id = bt.run_id
WHERE bt.backfill_id = $1
ORDER BY bt.tick, bt.row_name
