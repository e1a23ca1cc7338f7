-- Interrupted runs, recovery rules, the last claimed tick, and skip records.
-- Never edit a migration after it has landed.

-- `interrupted`: asked to stop and did not finish (handed over); `cancelled` stays readable for
-- rows written by earlier versions.
ALTER TABLE scheduler_runs DROP CONSTRAINT scheduler_runs_status_check;
ALTER TABLE scheduler_runs ADD CONSTRAINT scheduler_runs_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted', 'lost', 'cancelled'));

-- What the claiming node's binary said to do if the run's outcome becomes unknown.
ALTER TABLE scheduler_runs ADD COLUMN recovery text NOT NULL DEFAULT 'rerun'
    CHECK (recovery IN ('rerun', 'never'));

-- The tick most recently claimed: a reconcile never schedules a next run at or before it.
ALTER TABLE scheduler_tasks ADD COLUMN last_scheduled_at timestamptz;

-- Due ticks that did not get a run of their own, one row per incident (a range of ticks).
CREATE TABLE scheduler_skips (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_name   text NOT NULL,
    reason      text NOT NULL,
    first_tick  timestamptz NOT NULL,
    last_tick   timestamptz NOT NULL,
    ticks       bigint NOT NULL CHECK (ticks > 0),
    exact       boolean NOT NULL DEFAULT true,
    run_id      bigint,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CHECK (first_tick <= last_tick)
);

CREATE INDEX scheduler_skips_task_idx ON scheduler_skips (task_name, last_tick);
CREATE INDEX scheduler_skips_recorded_idx ON scheduler_skips (recorded_at);
