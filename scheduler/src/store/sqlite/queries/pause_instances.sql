-- Task ?1's instances take its pause at ?5 (now): by ?2, for ?3, until ?4. Those not paused, and
-- those holding the task's pause in force (a pause replaced); one paused on its own keeps its
-- own. Runs before the task's own row is paused (pause_task.sql): the task's pause it compares
-- with is the one in force.
UPDATE scheduler_tasks
SET paused_at = ?5, paused_by = ?2, pause_reason = ?3, pause_until = ?4, updated_at = ?5
WHERE instance_of = ?1
  AND (paused_at IS NULL OR EXISTS (
      SELECT 1 FROM scheduler_tasks AS t
      WHERE t.name = ?1 AND t.paused_at = scheduler_tasks.paused_at
        AND t.paused_by IS scheduler_tasks.paused_by))
