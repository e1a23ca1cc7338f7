-- Delete instance row ?1 unless a run of it holds its lock (or it is removed already).
DELETE FROM scheduler_tasks
WHERE name = ?1 AND instance_of IS NOT NULL AND removed_at IS NULL AND lock_token IS NULL
