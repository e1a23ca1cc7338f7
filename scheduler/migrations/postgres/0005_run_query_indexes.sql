-- Run queries by trigger, newest first (cursor on id): a manual or retry run is rare, so
-- without this a page of them scans the primary key past most of the history.
CREATE INDEX scheduler_runs_trigger_id_idx ON scheduler_runs (trigger, id DESC);
