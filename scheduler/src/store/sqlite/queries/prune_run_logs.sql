-- The logs of the runs prune_runs deletes next, in the same transaction (the same selection:
-- nothing changes between the two statements, and the order is total).
DELETE FROM scheduler_run_logs
WHERE run_id IN (
    SELECT id FROM scheduler_runs
    WHERE finished_at < ?1
    ORDER BY finished_at, id
    LIMIT ?2
)
