-- Run state of the scheduler in an embedded SQLite file. Applied by the library at start-up
-- (scheduler::store::sqlite). The schema of the PostgreSQL migrations 0001 and 0002 in one step:
-- same tables, columns, checks and indexes. Never edit a migration after it has landed.
--
-- Types: timestamps are INTEGER unix microseconds (PostgreSQL's timestamptz resolution), booleans
-- INTEGER 0/1, lock tokens TEXT (hyphenated UUIDs), a node's task names a TEXT JSON array. Tables
-- are STRICT, so a value of the wrong type is refused instead of stored.

-- One row per task name: the config's desired state (cron, timezone, enabled) as last reconciled,
-- and the engine's run state (next run, lock, last outcome).
CREATE TABLE scheduler_tasks (
    name                 TEXT NOT NULL PRIMARY KEY,
    cron                 TEXT NOT NULL,
    timezone             TEXT NOT NULL,
    enabled              INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    next_run_at          INTEGER,
    lock_owner           TEXT,
    lock_token           TEXT,
    lock_expires_at      INTEGER,
    last_run_at          INTEGER,
    last_finished_at     INTEGER,
    last_status          TEXT,
    last_error           TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    orphaned_since       INTEGER,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    -- The tick most recently claimed: a reconcile never schedules a next run at or before it.
    last_scheduled_at    INTEGER,
    CONSTRAINT scheduler_tasks_lock_consistent
        CHECK ((lock_token IS NULL) = (lock_owner IS NULL) AND (lock_token IS NULL) = (lock_expires_at IS NULL))
) STRICT;

-- The queries say `enabled = 1`, the same term, so the planner can use the partial index.
CREATE INDEX scheduler_tasks_next_run_idx ON scheduler_tasks (next_run_at) WHERE enabled = 1;
CREATE INDEX scheduler_tasks_locked_idx ON scheduler_tasks (lock_expires_at) WHERE lock_token IS NOT NULL;

-- One row per run: what tick it served, who ran it, how it ended. AUTOINCREMENT: an id is never
-- reused after its run is pruned (like PostgreSQL's identity column).
CREATE TABLE scheduler_runs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    task_name       TEXT NOT NULL,
    scheduled_at    INTEGER NOT NULL,
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    -- `interrupted`: asked to stop and did not finish (handed over); `cancelled` is only read.
    status          TEXT NOT NULL
        CONSTRAINT scheduler_runs_status_check
        CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted', 'lost', 'cancelled')),
    node_id         TEXT NOT NULL,
    lock_token      TEXT NOT NULL,
    ticks_collapsed INTEGER NOT NULL DEFAULT 0,
    error           TEXT,
    -- What the claiming node's binary said to do if the run's outcome becomes unknown.
    recovery        TEXT NOT NULL DEFAULT 'rerun' CHECK (recovery IN ('rerun', 'never'))
) STRICT;

CREATE INDEX scheduler_runs_task_idx ON scheduler_runs (task_name, scheduled_at DESC);
CREATE INDEX scheduler_runs_running_idx ON scheduler_runs (lock_token) WHERE status = 'running';
CREATE INDEX scheduler_runs_finished_idx ON scheduler_runs (finished_at) WHERE finished_at IS NOT NULL;

-- Cluster membership: every node's heartbeat and the tasks its binary registers. With SQLite the
-- cluster is one process, but its record reads the same as on PostgreSQL.
CREATE TABLE scheduler_nodes (
    node_id      TEXT NOT NULL PRIMARY KEY,
    hostname     TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    version      TEXT NOT NULL,
    tasks        TEXT NOT NULL CHECK (json_valid(tasks) AND json_type(tasks) = 'array'),
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    stopped_at   INTEGER
) STRICT;

-- The last config document applied (one row), so an older document version cannot roll the
-- tasks back.
CREATE TABLE scheduler_config_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    version    INTEGER,
    digest     TEXT NOT NULL,
    applied_by TEXT NOT NULL,
    applied_at INTEGER NOT NULL
) STRICT;

-- Due ticks that did not get a run of their own, one row per incident (a range of ticks).
CREATE TABLE scheduler_skips (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_name   TEXT NOT NULL,
    reason      TEXT NOT NULL,
    first_tick  INTEGER NOT NULL,
    last_tick   INTEGER NOT NULL,
    ticks       INTEGER NOT NULL CHECK (ticks > 0),
    exact       INTEGER NOT NULL DEFAULT 1 CHECK (exact IN (0, 1)),
    run_id      INTEGER,
    recorded_at INTEGER NOT NULL,
    CHECK (first_tick <= last_tick)
) STRICT;

CREATE INDEX scheduler_skips_task_idx ON scheduler_skips (task_name, last_tick);
CREATE INDEX scheduler_skips_recorded_idx ON scheduler_skips (recorded_at);
