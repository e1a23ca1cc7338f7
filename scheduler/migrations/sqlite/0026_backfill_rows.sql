-- A backfill's ticks per row (crate::shard): a backfill of a task with shards, or of an
-- instance of one, runs each tick once on each of its rows (the task's own and `task[i]`; an
-- instance's own and `task/key[i]`), so each tick is kept once per row, `row_name`, with the
-- run that served it there. The ticks recorded before are those of the backfilled row itself.
-- SQLite cannot change a primary key: the table is made anew and its rows copied.
-- Never edit a migration after it has landed.
CREATE TABLE scheduler_backfill_ticks_rows (
    backfill_id INTEGER NOT NULL REFERENCES scheduler_backfills (id) ON DELETE CASCADE,
    row_name    TEXT NOT NULL,
    tick        INTEGER NOT NULL,
    run_id      INTEGER,
    PRIMARY KEY (backfill_id, row_name, tick)
) STRICT;
INSERT INTO scheduler_backfill_ticks_rows (backfill_id, row_name, tick, run_id)
SELECT bt.backfill_id, b.task_name, bt.tick, bt.run_id
FROM scheduler_backfill_ticks AS bt JOIN scheduler_backfills AS b ON b.id = bt.backfill_id;
DROP TABLE scheduler_backfill_ticks;
ALTER TABLE scheduler_backfill_ticks_rows RENAME TO scheduler_backfill_ticks;
CREATE INDEX scheduler_backfill_ticks_pending_idx
    ON scheduler_backfill_ticks (backfill_id, row_name, tick) WHERE run_id IS NULL;
