-- Make row ?1 (just created or updated by the reconcile) the config's instance ?3 of task ?2,
-- with arguments ?4 and its own owners ?6 and labels ?7 and levels ?8 (JSON text; NULL: its task's), at ?5
-- (now): owned by the config, not removed. A row not paused takes its task's pause in force
-- (its `until` not passed), as an instance made at run time takes it (instance_upsert.sql) and
-- as pausing the task gives it (pause_instances.sql): the task's resume ends it with the
-- task's own. A row paused keeps its pause.
WITH task AS (
    SELECT paused_at, paused_by, pause_reason, pause_until
    FROM scheduler_tasks
    WHERE name = ?2 AND instance_of IS NULL AND paused_at IS NOT NULL
      AND (pause_until IS NULL OR pause_until > ?5)
)
UPDATE scheduler_tasks
SET instance_of = ?2, instance_key = ?3, args = ?4, owners = ?6, labels = ?7, sla = ?8,
    instance_source = 'config', removed_at = NULL,
    paused_at = CASE WHEN paused_at IS NULL THEN (SELECT paused_at FROM task)
                     ELSE paused_at END,
    paused_by = CASE WHEN paused_at IS NULL THEN (SELECT paused_by FROM task)
                     ELSE paused_by END,
    pause_reason = CASE WHEN paused_at IS NULL THEN (SELECT pause_reason FROM task)
                        ELSE pause_reason END,
    pause_until = CASE WHEN paused_at IS NULL THEN (SELECT pause_until FROM task)
                       ELSE pause_until END,
    updated_at = ?5
WHERE name = ?1
