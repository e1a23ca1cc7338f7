-- A manual run's arguments override (issue 39): `scheduler_tasks.manual_args` holds the
-- arguments a manual run asked for (JSON text; NULL: the row's own), taken with the manual
-- request by the claim that serves it; `scheduler_runs.args_override` records them with the run
-- (NULL: the run used its row's own arguments).
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN manual_args TEXT;
ALTER TABLE scheduler_runs ADD COLUMN args_override TEXT;
