-- Task $1's instances take its pause (by $2, for $3, until $4): those not paused, and those
-- holding the task's pause in force (a pause replaced). One paused on its own keeps its own.
-- Runs before the task's own row is paused (pause_task.sql): the task's pause it compares with
-- is the one in force.
UPDATE scheduler_tasks AS i
SET paused_at = now(), paused_by = $2, pause_reason = $3, pause_until = $4, updated_at = now()
WHERE i.instance_of = $1
  AND (i.paused_at IS NULL OR EXISTS (
      SELECT 1 FROM scheduler_tasks AS t
      WHERE t.name = $1 AND t.paused_at = i.paused_at
        AND t.paused_by IS NOT DISTINCT FROM i.paused_by))
