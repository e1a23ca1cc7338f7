-- An operator's request to cancel a running run: who asked and when. The node running the run
-- learns of it by NOTIFY and, as a fallback, after each renewal of its locks (one lookup of its
-- running runs in the partial index below, which holds only runs somebody asked to cancel: no
-- cost to runs nobody cancels, and renewals stay HOT updates of the task rows).
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_runs ADD COLUMN cancel_requested_at timestamptz;
ALTER TABLE scheduler_runs ADD COLUMN cancel_requested_by text;
CREATE INDEX scheduler_runs_cancel_requested_idx ON scheduler_runs (id)
    WHERE cancel_requested_at IS NOT NULL;
