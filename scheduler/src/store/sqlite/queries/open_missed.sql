-- Open a missed-run incident for task ?1 at tick ?2 if its next run is still that tick and it
-- has none open. ?3 now. Returns the task when this statement opened it.
UPDATE scheduler_tasks
SET missed_since = ?2, updated_at = ?3
WHERE name = ?1 AND missed_since IS NULL AND next_run_at = ?2
RETURNING name
