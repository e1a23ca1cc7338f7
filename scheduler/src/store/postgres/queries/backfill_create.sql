-- Record a backfill of task $1 unless the task does not exist or another backfill of it still
-- waits to run: $2 range start, $3 range end, $4 every tick?, $5 cap on runs, $6 concurrency, $7
-- pace (ms), $8 who asked, $9 its ticks, $10 the rows that run each tick (the task's own, $1,
-- and its shards' rows; those that exist take part). The task row is locked first, so two
-- requests for one task are serialised. Returns the backfill still waiting on one of its rows
-- before and the one recorded (no row: no such task).
WITH task AS (
    SELECT name, backfill_id FROM scheduler_tasks WHERE name = $1 FOR UPDATE
), busy AS (
    SELECT max(backfill_id) AS id FROM scheduler_tasks WHERE name = ANY($10::text[])
), created AS (
    INSERT INTO scheduler_backfills (task_name, range_from, range_to, all_ticks, max_runs,
                                     concurrency, pace_ms, requested_by)
    SELECT task.name, $2, $3, $4, $5, $6, $7, $8 FROM task, busy WHERE busy.id IS NULL
    RETURNING id
), rows AS (
    SELECT name FROM scheduler_tasks WHERE name = ANY($10::text[])
), ticks AS (
    INSERT INTO scheduler_backfill_ticks (backfill_id, row_name, tick)
    SELECT created.id, rows.name, t FROM created, rows, unnest($9::timestamptz[]) AS t
), started AS (
    UPDATE scheduler_tasks AS t
    SET backfill_id = created.id, backfill_at = now(), updated_at = now()
    FROM created
    WHERE t.name = ANY($10::text[]) AND cardinality($9::timestamptz[]) > 0
)
SELECT (SELECT id FROM busy) AS busy, (SELECT id FROM created) AS id FROM task
