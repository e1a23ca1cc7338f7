-- Each task's instances at a glance (removed ones left out; an instance's shard rows are one
-- instance): how many, how many run now, how many failed their last run in a row, how many
-- ever ran, the earliest next run of those enabled and not paused, and the row whose run
-- started last (its key, start, end and how it ended).
SELECT task, instances, running, failing, ran, next_run_at, key, last_run_at, last_finished_at,
       last_status
FROM (
    SELECT instance_of AS task, instance_key AS key, last_run_at, last_finished_at, last_status,
           count(*) OVER w AS instances,
           sum(CASE WHEN lock_owner IS NOT NULL THEN 1 ELSE 0 END) OVER w AS running,
           sum(CASE WHEN consecutive_failures > 0 THEN 1 ELSE 0 END) OVER w AS failing,
           count(last_run_at) OVER w AS ran,
           min(CASE WHEN enabled AND paused_at IS NULL THEN next_run_at END) OVER w AS next_run_at,
           row_number() OVER (
               PARTITION BY instance_of
               ORDER BY last_run_at IS NULL, last_run_at DESC, instance_key
           ) AS latest
    FROM scheduler_tasks
    WHERE instance_of IS NOT NULL AND removed_at IS NULL AND shard_of IS NULL
    WINDOW w AS (PARTITION BY instance_of)
) AS per_instance
WHERE latest = 1
