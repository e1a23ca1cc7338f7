-- A fencing token per task: `fence` counts the task's claims (every lock taken, by any trigger:
-- each one more than the last), and each run keeps the value its claim took
-- (`ctx.fencing_token()`), so a write the handler guards with it can refuse an older holder's.
-- NULL on runs recorded before this migration.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
ALTER TABLE scheduler_runs ADD COLUMN fencing_token INTEGER;
