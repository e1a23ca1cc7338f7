-- Refresh node $1's heartbeat; return whether its row exists, the other nodes that went
-- silent (no heartbeat for $2 ms) without stopping cleanly, and how many enabled, unpaused
-- tasks are more than $3 ms overdue with no missed-run incident open (a hint to look closer),
-- how many nodes are live (not stopped, a heartbeat within $2 ms; this one counted), and how
-- many instances there are (an index-only count of the instances' partial index).
WITH me AS (
    UPDATE scheduler_nodes SET heartbeat_at = now(), stopped_at = NULL
    WHERE node_id = $1
    RETURNING node_id
)
SELECT (SELECT count(*) FROM me) > 0 AS registered,
       ARRAY(SELECT node_id FROM scheduler_nodes
             WHERE stopped_at IS NULL
               AND node_id <> $1
               AND heartbeat_at < now() - $2::int8 * interval '1 millisecond'
             ORDER BY node_id) AS silent,
       (SELECT count(*) FROM scheduler_tasks
        WHERE enabled AND paused_at IS NULL AND missed_since IS NULL
          AND (node_pin IS NULL OR node_pin = '')
          AND next_run_at < now() - $3::int8 * interval '1 millisecond') AS overdue,
       1 + (SELECT count(*) FROM scheduler_nodes
            WHERE stopped_at IS NULL
              AND node_id <> $1
              AND heartbeat_at >= now() - $2::int8 * interval '1 millisecond') AS live,
       (SELECT count(*) FROM scheduler_tasks WHERE instance_of IS NOT NULL) AS instances
