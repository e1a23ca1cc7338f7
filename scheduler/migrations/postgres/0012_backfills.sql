-- Backfills: an operator's request to run a task's past ticks again (`scheduler backfill`,
-- `POST /api/tasks/{name}/backfill`), kept in the database so that any node takes the work and
-- a node's restart loses none of it.
--
-- `scheduler_backfills` holds the request (who, the range, the options, whether it was
-- cancelled); `scheduler_backfill_ticks` the ticks it runs, one row each, with the run that
-- served it once claimed (NULL: pending). A tick's progress is its run's status. The task row
-- carries the backfill waiting to run (`backfill_id`) and when its next tick may start
-- (`backfill_at`, paced): a fourth kind of due time beside the tick, the retry and the manual
-- run, claimed through the same lock as they are, so a backfilled run never overlaps the
-- task's own runs. Runs of a backfill have trigger `backfill`.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_runs DROP CONSTRAINT scheduler_runs_trigger_check;
ALTER TABLE scheduler_runs ADD CONSTRAINT scheduler_runs_trigger_check
    CHECK (trigger IN ('schedule', 'retry', 'manual', 'backfill'));

CREATE TABLE scheduler_backfills (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_name    text NOT NULL,
    range_from   timestamptz NOT NULL,
    range_to     timestamptz NOT NULL,
    all_ticks    boolean NOT NULL,
    max_runs     integer NOT NULL CHECK (max_runs >= 1),
    concurrency  integer NOT NULL CHECK (concurrency >= 1),
    pace_ms      bigint NOT NULL CHECK (pace_ms >= 0),
    requested_by text NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    cancelled_at timestamptz,
    cancelled_by text
);
CREATE INDEX scheduler_backfills_task_idx ON scheduler_backfills (task_name, id DESC);

CREATE TABLE scheduler_backfill_ticks (
    backfill_id bigint NOT NULL REFERENCES scheduler_backfills (id) ON DELETE CASCADE,
    tick        timestamptz NOT NULL,
    run_id      bigint,
    PRIMARY KEY (backfill_id, tick)
);
CREATE INDEX scheduler_backfill_ticks_pending_idx ON scheduler_backfill_ticks (backfill_id, tick)
    WHERE run_id IS NULL;

ALTER TABLE scheduler_tasks ADD COLUMN backfill_id bigint;
ALTER TABLE scheduler_tasks ADD COLUMN backfill_at timestamptz;
CREATE INDEX scheduler_tasks_backfill_idx ON scheduler_tasks (backfill_at)
    WHERE backfill_at IS NOT NULL;
