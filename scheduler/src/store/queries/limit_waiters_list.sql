-- The rows whose due tick waits for a share of its limit (crate::limits), with the limit (the
-- row's own, else its task's) and the tick it waits to run.
SELECT t.name, t.limit_waiting_since, t.next_run_at,
       coalesce(t.limit_name,
                CASE WHEN t.instance_of IS NOT NULL
                     THEN (SELECT o.limit_name FROM scheduler_tasks AS o
                           WHERE o.name = t.instance_of) END) AS limit_name
FROM scheduler_tasks AS t
WHERE t.limit_waiting_since IS NOT NULL AND t.lock_token IS NULL
ORDER BY t.limit_waiting_since, t.name
