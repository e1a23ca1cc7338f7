-- Delete up to $2 finished runs older than the retention ($1 ms), oldest first, with their
-- logs. Run again until it deletes fewer than $2, so no statement holds many row locks for long.
-- $3 is where the previous batch of the same pass stopped (the latest finish time it deleted;
-- NULL for the first batch): the index scan starts there instead of stepping over the entries of
-- every run the pass already deleted, which stay in the index until vacuum (at 3,000,000 runs
-- pruned in one pass, the last batch read 14,785 index pages to find its first live row).
-- Returns how many old runs it found (up to $2: fewer means the pass is done; a run another
-- node's prune deleted meanwhile is found but not deleted here), how many it deleted, and the
-- latest finish time among them.
WITH old AS (
    SELECT id FROM scheduler_runs
    WHERE finished_at < now() - $1::int8 * interval '1 millisecond'
      AND finished_at >= coalesce($3::timestamptz, '-infinity')
    ORDER BY finished_at
    LIMIT $2
), logs AS (
    DELETE FROM scheduler_run_logs WHERE run_id IN (SELECT id FROM old)
), runs AS (
    DELETE FROM scheduler_runs WHERE id IN (SELECT id FROM old)
    RETURNING finished_at
)
SELECT (SELECT count(*) FROM old) AS found, count(*) AS deleted, max(finished_at) AS stopped_at
FROM runs
