-- Store task row ?1's jitter window as the reconcile knows it, ?2 milliseconds (NULL: none), at
-- ?3 (after tasks_create, same transaction). Read by the claims as the row's window and by an
-- instance upsert made without a config (the admin API, the command line) as its task's; see
-- crate::ticks::jitter.
UPDATE scheduler_tasks
SET jitter_ms = ?2,
    updated_at = ?3
WHERE name = ?1
