-- Delete the rows of instances removed while a run of them was in flight, once that run has
-- released the lock.
DELETE FROM scheduler_tasks
WHERE removed_at IS NOT NULL AND lock_token IS NULL
