-- Store each task row's jitter window as the reconcile knows it (after tasks_create, same
-- transaction): $1 row names, $2 the window of each in milliseconds (NULL: none). Read by the
-- claims as the row's window and by an instance upsert made without a config (the admin API,
-- the command line) as its task's; see crate::ticks::jitter.
UPDATE scheduler_tasks AS t
SET jitter_ms = j.jitter_ms,
    updated_at = now()
FROM unnest($1::text[], $2::bigint[]) AS j(name, jitter_ms)
WHERE t.name = j.name
