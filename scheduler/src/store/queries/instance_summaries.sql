-- Each task's instances at a glance (removed ones left out; an instance's shard rows are one
-- instance): how many, how many run now, how many failed their last run, how many ever ran,
-- the earliest next run of those enabled and not paused, and the row whose run started last
-- (its key, start, end and how it ended; rows tied on that start each come, the caller keeps
-- one). One pass grouping the rows, then the latest ones found by the index on `instance_of`
-- (a window ranking every row cost 3 to 6 times as much at 100,000 instances).
-- One task's alone ($1): the `@include` lines below become `AND instance_of = $1` and
-- `AND t.instance_of = $1` (`queries::one_task_instance_summaries`), so both its grouping and
-- its latest row are found by the index on `instance_of` (PostgreSQL does not use that
-- partial index for the join's condition alone: it read every row, 100,000 instances of other
-- tasks included); every task's: the statement as it is (those lines comments).
SELECT p.task, p.instances, p.running, p.failing, p.ran, p.next_run_at,
       t.instance_key AS key, t.last_run_at, t.last_finished_at, t.last_status
FROM (
    SELECT instance_of AS task, count(*) AS instances,
           sum(CASE WHEN lock_owner IS NOT NULL THEN 1 ELSE 0 END) AS running,
           sum(CASE WHEN consecutive_failures > 0 THEN 1 ELSE 0 END) AS failing,
           count(last_run_at) AS ran,
           min(CASE WHEN enabled AND paused_at IS NULL THEN next_run_at END) AS next_run_at,
           max(last_run_at) AS latest_at
    FROM scheduler_tasks
    WHERE instance_of IS NOT NULL AND removed_at IS NULL AND shard_of IS NULL
      -- @include one_task
    GROUP BY instance_of
) AS p
LEFT JOIN scheduler_tasks AS t
  ON t.instance_of = p.task AND t.last_run_at = p.latest_at
 AND t.removed_at IS NULL AND t.shard_of IS NULL
 -- @include one_task_latest
