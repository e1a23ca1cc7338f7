-- Record a backfill of task $1 unless the task does not exist or another backfill of it still
-- waits to run: $2 range start, $3 range end, $4 every tick?, $5 cap on runs, $6 concurrency, $7
-- pace (ms), $8 who asked, $9 its ticks. The task row is locked first, so two requests for one
-- task are serialised. Returns the task's waiting backfill before and the one recorded (no
-- row: no such task).
WITH task AS (
    SELECT name, backfill_id FROM scheduler_tasks WHERE name = $1 FOR UPDATE
), created AS (
    INSERT INTO scheduler_backfills (task_name, range_from, range_to, all_ticks, max_runs,
                                     concurrency, pace_ms, requested_by)
    SELECT task.name, $2, $3, $4, $5, $6, $7, $8 FROM task WHERE task.backfill_id IS NULL
    RETURNING id
), ticks AS (
    INSERT INTO scheduler_backfill_ticks (backfill_id, tick)
    SELECT created.id, t FROM created, unnest($9::timestamptz[]) AS t
), started AS (
    UPDATE scheduler_tasks AS t
    SET backfill_id = created.id, backfill_at = now(), updated_at = now()
    FROM created
    WHERE t.name = $1 AND cardinality($9::timestamptz[]) > 0
)
SELECT task.backfill_id AS busy, (SELECT id FROM created) AS id FROM task
