-- Delete up to ?2 runs finished before ?1, oldest first (their logs went first, by
-- prune_run_logs). Run again until it deletes fewer than ?2, so no transaction holds the write
-- lock for long.
DELETE FROM scheduler_runs
WHERE id IN (
    SELECT id FROM scheduler_runs
    WHERE finished_at < ?1
    ORDER BY finished_at, id
    LIMIT ?2
)
