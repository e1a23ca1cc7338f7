-- Make row $1 (just created or updated by the reconcile) the config's instance $3 of task $2,
-- with arguments $4 and its own owners $5 and labels $6 and levels $7 (JSON text; NULL: its task's): owned by
-- the config, not removed. A row not paused takes its task's pause in force (its `until` not
-- passed), as an instance made at run time takes it (instance_upsert.sql) and as pausing the
-- task gives it (pause_instances.sql): the task's resume ends it with the task's own. A row
-- paused keeps its pause.
WITH task AS (
    SELECT paused_at, paused_by, pause_reason, pause_until
    FROM scheduler_tasks
    WHERE name = $2 AND instance_of IS NULL AND paused_at IS NOT NULL
      AND (pause_until IS NULL OR pause_until > now())
)
UPDATE scheduler_tasks AS i
SET instance_of = $2, instance_key = $3, args = $4, owners = $5, labels = $6, sla = $7,
    instance_source = 'config', removed_at = NULL,
    paused_at = CASE WHEN i.paused_at IS NULL THEN (SELECT paused_at FROM task)
                     ELSE i.paused_at END,
    paused_by = CASE WHEN i.paused_at IS NULL THEN (SELECT paused_by FROM task)
                     ELSE i.paused_by END,
    pause_reason = CASE WHEN i.paused_at IS NULL THEN (SELECT pause_reason FROM task)
                        ELSE i.pause_reason END,
    pause_until = CASE WHEN i.paused_at IS NULL THEN (SELECT pause_until FROM task)
                       ELSE i.pause_until END,
    updated_at = now()
WHERE i.name = $1
