-- A page of task ?1's instances (removed ones only with ?6), by key: keys whose lowercase matches ?2 (a
-- LIKE pattern, `\` escaping), only key ?3 (NULL: any), after key ?4 (NULL: from the first), at
-- most ?5. Each row's state as `task_states.sql` reads a task's, with the instance's columns.
SELECT
-- @include task_state_columns.sql
       , instance_of AS task, instance_key AS key, args, instance_source,
       removed_at IS NOT NULL AS removed, owners, labels, sla, limit_name, jitter_ms
FROM scheduler_tasks
WHERE instance_of = ?1 AND shard_of IS NULL
  AND lower(instance_key) LIKE ?2 ESCAPE '\'
  AND (?3 IS NULL OR instance_key = ?3)
  AND (?4 IS NULL OR instance_key > ?4)
  AND (?6 OR removed_at IS NULL)
ORDER BY instance_key
LIMIT ?5
