-- Instance row ?1 (task ?2, key ?3; a removed one only with ?4) with its state, as
-- `instance_states.sql` reads each of a page: read by its name alone.
SELECT
-- @include task_state_columns.sql
       , instance_of AS task, instance_key AS key, args, instance_source,
       removed_at IS NOT NULL AS removed, owners, labels, sla, limit_name, jitter_ms
FROM scheduler_tasks
WHERE name = ?1 AND instance_of = ?2 AND instance_key = ?3
  AND (?4 OR removed_at IS NULL)
