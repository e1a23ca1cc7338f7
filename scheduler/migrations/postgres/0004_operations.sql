-- Operations: operator pauses, the audit trail, per-run logs, and indexes for run queries.
-- Never edit a migration after it has landed.

-- An operator's pause: no new runs anywhere until resumed or until `pause_until`. A reconcile
-- never touches these columns.
ALTER TABLE scheduler_tasks ADD COLUMN paused_at timestamptz;
ALTER TABLE scheduler_tasks ADD COLUMN paused_by text;
ALTER TABLE scheduler_tasks ADD COLUMN pause_reason text;
ALTER TABLE scheduler_tasks ADD COLUMN pause_until timestamptz;
ALTER TABLE scheduler_tasks ADD CONSTRAINT scheduler_tasks_pause_consistent
    CHECK ((paused_at IS NULL) = (paused_by IS NULL) AND (paused_at IS NULL) = (pause_reason IS NULL)
           AND (pause_until IS NULL OR paused_at IS NOT NULL));

CREATE INDEX scheduler_tasks_pause_idx ON scheduler_tasks (pause_until) WHERE paused_at IS NOT NULL;

-- Every operator action: who, what, when, from where.
CREATE TABLE scheduler_audit (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    actor  text NOT NULL,
    action text NOT NULL,
    task   text NOT NULL,
    detail text NOT NULL,
    source text NOT NULL
);

CREATE INDEX scheduler_audit_at_idx ON scheduler_audit (at);

-- What a handler logged during its run, in chunks written as it went (bounded per run).
CREATE TABLE scheduler_run_logs (
    run_id    bigint NOT NULL,
    seq       integer NOT NULL,
    text      text NOT NULL,
    lines     integer NOT NULL,
    truncated boolean NOT NULL DEFAULT false,
    PRIMARY KEY (run_id, seq)
);

-- Run queries: by task or status, newest first (cursor on id), and by start time.
CREATE INDEX scheduler_runs_task_id_idx ON scheduler_runs (task_name, id DESC);
CREATE INDEX scheduler_runs_status_id_idx ON scheduler_runs (status, id DESC);
CREATE INDEX scheduler_runs_started_idx ON scheduler_runs (started_at);
