-- Open a missed-run incident for each (task, tick) whose next run is still that tick and that
-- has none open. Returns the tasks whose incident this statement opened (one node wins).
-- $1, $2 parallel arrays: task, tick.
UPDATE scheduler_tasks AS t
SET missed_since = m.tick, updated_at = now()
FROM unnest($1::text[], $2::timestamptz[]) AS m(name, tick)
WHERE t.name = m.name AND t.missed_since IS NULL AND t.next_run_at = m.tick
RETURNING t.name
