-- Read back a batch of run ends whose COMMIT got no answer: the status of each run ($1). The
-- engine decides from these what the batch did (see operations/commit.rs).
SELECT id, status
FROM scheduler_runs
WHERE id = ANY($1::int8[])
