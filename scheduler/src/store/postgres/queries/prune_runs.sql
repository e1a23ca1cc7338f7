-- Delete finished runs older than the retention ($1 ms).
DELETE FROM scheduler_runs
WHERE finished_at < now() - $1::int8 * interval '1 millisecond'
