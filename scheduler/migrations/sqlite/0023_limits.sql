-- Limits shared by tasks (crate::limits): at most `size` runs of the rows naming a limit hold
-- locks at once. `scheduler_limits` holds each declared limit's size, written from the config
-- document's `limits` (SQLite's one writer serializes claims). `limit_name` on a task row: the
-- limit its runs hold (a task's from its config entry or attribute; an instance's own, NULL:
-- its task's). `limit_held`: the limit the row's current lock holds, written by the claim that
-- took it (the holders of a limit are the locked rows holding it). `limit_waiting_since`: the
-- row's due tick waits for its limit since then (cleared when it runs or is skipped).
-- Never edit a migration after it has landed.
CREATE TABLE scheduler_limits (
    name       TEXT NOT NULL PRIMARY KEY,
    size       INTEGER NOT NULL CHECK (size >= 1),
    updated_at INTEGER NOT NULL
) STRICT;
ALTER TABLE scheduler_tasks ADD COLUMN limit_name TEXT;
ALTER TABLE scheduler_tasks ADD COLUMN limit_held TEXT;
ALTER TABLE scheduler_tasks ADD COLUMN limit_waiting_since INTEGER;
CREATE INDEX scheduler_tasks_limit_held_idx ON scheduler_tasks (limit_held)
    WHERE lock_token IS NOT NULL AND limit_held IS NOT NULL;
