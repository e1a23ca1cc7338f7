-- The cancel requests recorded for any of the runs $1 (the caller's running runs): a lookup in
-- the partial index of cancelled runs, nearly always empty.
SELECT id, cancel_requested_at, cancel_requested_by
FROM scheduler_runs
WHERE cancel_requested_at IS NOT NULL AND id = ANY($1::int8[])
