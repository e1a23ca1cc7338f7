-- An operator's request to cancel a running run: who asked and when (unix microseconds). The
-- node learns of it at once in process, and after each renewal of its locks (one lookup in the
-- partial index below, which holds only runs somebody asked to cancel).
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_runs ADD COLUMN cancel_requested_at INTEGER;
ALTER TABLE scheduler_runs ADD COLUMN cancel_requested_by TEXT;
CREATE INDEX scheduler_runs_cancel_requested_idx ON scheduler_runs (id)
    WHERE cancel_requested_at IS NOT NULL;
