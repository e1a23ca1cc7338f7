-- Limits shared by tasks (crate::limits): at most `size` runs of the rows naming a limit hold
-- locks at once, across the nodes. `scheduler_limits` holds each declared limit's size, written
-- from the config document's `limits`; a claim locks the rows of the limits it would take
-- (FOR UPDATE, in name order) so claims of one limit on different nodes take turns.
-- `limit_name` on a task row: the limit its runs hold (a task's from its config entry or
-- attribute; an instance's own, NULL: its task's). `limit_held`: the limit the row's current
-- lock holds, written by the claim that took it (the holders of a limit are the locked rows
-- holding it, so a crashed holder's share comes back when its lock is released).
-- `limit_waiting_since`: the row's due tick waits for its limit since then (cleared when it
-- runs or is skipped).
-- Never edit a migration after it has landed.
CREATE TABLE scheduler_limits (
    name       text PRIMARY KEY,
    size       integer NOT NULL CHECK (size >= 1),
    updated_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE scheduler_tasks ADD COLUMN limit_name text;
ALTER TABLE scheduler_tasks ADD COLUMN limit_held text;
ALTER TABLE scheduler_tasks ADD COLUMN limit_waiting_since timestamptz;
CREATE INDEX scheduler_tasks_limit_held_idx ON scheduler_tasks (limit_held)
    WHERE lock_token IS NOT NULL AND limit_held IS NOT NULL;
