-- Delete up to $2 finished runs older than the retention ($1 ms), oldest first, with their
-- logs. Run again until it deletes fewer than $2, so no statement holds many row locks for long.
WITH old AS (
    SELECT id FROM scheduler_runs
    WHERE finished_at < now() - $1::int8 * interval '1 millisecond'
    ORDER BY finished_at
    LIMIT $2
), logs AS (
    DELETE FROM scheduler_run_logs WHERE run_id IN (SELECT id FROM old)
)
DELETE FROM scheduler_runs WHERE id IN (SELECT id FROM old)
