-- Jitter (crate::ticks::jitter): a tick starts at a fixed offset after it, within its task's
-- jitter window. `next_run_at` stays what the claim selects and orders by (its partial index
-- unchanged): the start. `next_tick` is the tick it starts, when jitter shifted the start off it
-- (NULL: `next_run_at` is the tick itself, as for every row without jitter); the run serves
-- that tick. `jitter_ms`: an instance's own window (NULL: its task's, from the config entry or
-- the attribute). Columns without a default change only the catalog (no rewrite).
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN next_tick timestamptz;
ALTER TABLE scheduler_tasks ADD COLUMN jitter_ms bigint;
