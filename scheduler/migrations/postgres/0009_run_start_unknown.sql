-- A run's `started_at` is when its handler started, recorded with the run's end (the node's
-- measured start on the database's clock); NULL for a run whose handler never started (claimed
-- ahead of its tick and handed over at shutdown, or cancelled before its tick). Until its end a
-- running run carries the start its claim planned (its tick, or the claim's time), and a run
-- recorded `lost` keeps that planned start: whether its handler started is unknown.
-- Dropping NOT NULL changes only the catalog (no rewrite, no scan).
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_runs ALTER COLUMN started_at DROP NOT NULL;
