-- The cancel requests recorded for any of the runs ?1 (a JSON array of the caller's running
-- runs): a lookup in the partial index of cancelled runs, nearly always empty.
SELECT id, cancel_requested_at, cancel_requested_by
FROM scheduler_runs
WHERE cancel_requested_at IS NOT NULL AND id IN (SELECT value FROM json_each(?1))
