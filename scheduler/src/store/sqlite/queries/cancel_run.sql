-- Records an operator's request to cancel running run ?1, by ?2, at ?3 (now), unless one is
-- recorded already. Returns the run as it is now; no row: not running, or asked before.
UPDATE scheduler_runs
SET cancel_requested_at = ?3, cancel_requested_by = ?2
WHERE id = ?1 AND status = 'running' AND cancel_requested_at IS NULL
RETURNING
    -- @include run_columns.sql
