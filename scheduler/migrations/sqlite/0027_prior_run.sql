-- A run's claim writes its row's `last_run_at` (its planned start) before the run starts; the
-- start it replaces is kept in `prior_run_at`, so a run handed back before it started (no
-- handler ran) puts the row's last start back as it was (release_lock.sql). Read only then.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN prior_run_at INTEGER;
