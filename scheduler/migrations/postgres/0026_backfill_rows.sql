-- A backfill's ticks per row (crate::shard): a backfill of a task with shards, or of an
-- instance of one, runs each tick once on each of its rows (the task's own and `task[i]`; an
-- instance's own and `task/key[i]`), so each tick is kept once per row, `row_name`, with the
-- run that served it there. The ticks recorded before are those of the backfilled row itself.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_backfill_ticks ADD COLUMN row_name text;
UPDATE scheduler_backfill_ticks AS bt SET row_name = b.task_name
FROM scheduler_backfills AS b WHERE b.id = bt.backfill_id;
ALTER TABLE scheduler_backfill_ticks ALTER COLUMN row_name SET NOT NULL;
ALTER TABLE scheduler_backfill_ticks DROP CONSTRAINT scheduler_backfill_ticks_pkey;
ALTER TABLE scheduler_backfill_ticks ADD PRIMARY KEY (backfill_id, row_name, tick);
DROP INDEX scheduler_backfill_ticks_pending_idx;
CREATE INDEX scheduler_backfill_ticks_pending_idx
    ON scheduler_backfill_ticks (backfill_id, row_name, tick) WHERE run_id IS NULL;
