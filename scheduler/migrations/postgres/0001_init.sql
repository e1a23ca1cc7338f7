-- Run state of the scheduler. Applied by the library at start-up (scheduler::store::postgres),
-- inside the configured schema (search_path). Never edit a migration after it has landed.

-- One row per task name: the config's desired state (cron, timezone, enabled) as last reconciled,
-- and the engine's run state (next run, lock, last outcome).
CREATE TABLE scheduler_tasks (
    name                 text PRIMARY KEY,
    cron                 text NOT NULL,
    timezone             text NOT NULL,
    enabled              boolean NOT NULL,
    next_run_at          timestamptz,
    lock_owner           text,
    lock_token           uuid,
    lock_expires_at      timestamptz,
    last_run_at          timestamptz,
    last_finished_at     timestamptz,
    last_status          text,
    last_error           text,
    consecutive_failures integer NOT NULL DEFAULT 0,
    orphaned_since       timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT scheduler_tasks_lock_consistent
        CHECK ((lock_token IS NULL) = (lock_owner IS NULL) AND (lock_token IS NULL) = (lock_expires_at IS NULL))
);

CREATE INDEX scheduler_tasks_next_run_idx ON scheduler_tasks (next_run_at) WHERE enabled;
CREATE INDEX scheduler_tasks_locked_idx ON scheduler_tasks (lock_expires_at) WHERE lock_token IS NOT NULL;

-- One row per run: what tick it served, who ran it, how it ended.
CREATE TABLE scheduler_runs (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_name       text NOT NULL,
    scheduled_at    timestamptz NOT NULL,
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz,
    status          text NOT NULL
        CHECK (status IN ('running', 'succeeded', 'failed', 'lost', 'cancelled')),
    node_id         text NOT NULL,
    lock_token      uuid NOT NULL,
    ticks_collapsed integer NOT NULL DEFAULT 0,
    error           text
);

CREATE INDEX scheduler_runs_task_idx ON scheduler_runs (task_name, scheduled_at DESC);
CREATE INDEX scheduler_runs_running_idx ON scheduler_runs (lock_token) WHERE status = 'running';
CREATE INDEX scheduler_runs_finished_idx ON scheduler_runs (finished_at) WHERE finished_at IS NOT NULL;

-- Cluster membership: every node's heartbeat and the tasks its binary registers.
CREATE TABLE scheduler_nodes (
    node_id      text PRIMARY KEY,
    hostname     text NOT NULL,
    pid          integer NOT NULL,
    version      text NOT NULL,
    tasks        text[] NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    stopped_at   timestamptz
);

-- The last config document applied by any node (one row), so a node holding an older document
-- version cannot roll the tasks back during a rollout.
CREATE TABLE scheduler_config_state (
    id         smallint PRIMARY KEY CHECK (id = 1),
    version    bigint,
    digest     text NOT NULL,
    applied_by text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
