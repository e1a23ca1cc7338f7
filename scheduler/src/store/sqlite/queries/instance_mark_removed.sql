-- Mark instance row ?1 and its shard rows (`?1[i]`; never one the config owns) whose run in flight holds its lock removed at ?2 (now): nothing of it
-- is due again (disabled, no next run, retry or manual request); the row goes once the lock is
-- released.
UPDATE scheduler_tasks
SET removed_at = ?2, enabled = 0, disabled_at = coalesce(disabled_at, ?2),
    next_run_at = NULL, next_tick = NULL, retry_at = NULL, retry_tick = NULL, retry_attempt = NULL,
    manual_at = NULL, manual_by = NULL, updated_at = ?2
WHERE (name = ?1 OR shard_of = ?1) AND instance_of IS NOT NULL AND coalesce(instance_source, 'runtime') <> 'config'
  AND removed_at IS NULL
