-- A manual run's arguments override (issue 39): `scheduler_tasks.manual_args` holds the
-- arguments a manual run asked for (JSON text; NULL: the row's own), taken with the manual
-- request by the claim that serves it; `scheduler_runs.args_override` records them with the run
-- (NULL: the run used its row's own arguments). Columns without a default change only the
-- catalog (no rewrite).
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN manual_args text;
ALTER TABLE scheduler_runs ADD COLUMN args_override text;
