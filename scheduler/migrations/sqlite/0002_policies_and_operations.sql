-- Run policies and operations: the schema of the PostgreSQL migrations 0003 (timeouts, retries,
-- manual runs, missed-run detection, the webhook outbox) and 0004 (operator pauses, the audit
-- trail, per-run logs, indexes for run queries) in one step. Never edit a migration after it has
-- landed. Types as in 0001: timestamps INTEGER unix microseconds, booleans INTEGER 0/1, STRICT
-- tables.

-- scheduler_runs gets a new status (`timed_out`) in its CHECK constraint, which SQLite cannot
-- alter, so the table is rebuilt the documented way (https://www.sqlite.org/lang_altertable.html,
-- "Making Other Kinds Of Table Schema Changes"), inside the migration's transaction: create the
-- new table, copy the rows, drop the old one, rename the new one, recreate the indexes. No view,
-- trigger or foreign key refers to it.
CREATE TABLE scheduler_runs_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    task_name       TEXT NOT NULL,
    scheduled_at    INTEGER NOT NULL,
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    status          TEXT NOT NULL
        CONSTRAINT scheduler_runs_status_check
        CHECK (status IN ('running', 'succeeded', 'failed', 'timed_out', 'interrupted', 'lost',
                          'cancelled')),
    node_id         TEXT NOT NULL,
    lock_token      TEXT NOT NULL,
    ticks_collapsed INTEGER NOT NULL DEFAULT 0,
    error           TEXT,
    recovery        TEXT NOT NULL DEFAULT 'rerun' CHECK (recovery IN ('rerun', 'never')),
    -- Which attempt at its tick a run is (1: the scheduled run), what started it, and who asked.
    attempt         INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    trigger         TEXT NOT NULL DEFAULT 'schedule'
        CHECK (trigger IN ('schedule', 'retry', 'manual')),
    triggered_by    TEXT
) STRICT;

INSERT INTO scheduler_runs_new (id, task_name, scheduled_at, started_at, finished_at, status,
                                node_id, lock_token, ticks_collapsed, error, recovery)
SELECT id, task_name, scheduled_at, started_at, finished_at, status, node_id, lock_token,
       ticks_collapsed, error, recovery
FROM scheduler_runs;

-- Keep AUTOINCREMENT's promise across the rebuild: an id handed out before (even of a run pruned
-- since) is never handed out again.
INSERT INTO sqlite_sequence (name, seq)
SELECT 'scheduler_runs_new', 0
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'scheduler_runs_new');
UPDATE sqlite_sequence
SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'scheduler_runs'), 0))
WHERE name = 'scheduler_runs_new';

DROP TABLE scheduler_runs;
ALTER TABLE scheduler_runs_new RENAME TO scheduler_runs;

CREATE INDEX scheduler_runs_task_idx ON scheduler_runs (task_name, scheduled_at DESC);
CREATE INDEX scheduler_runs_running_idx ON scheduler_runs (lock_token) WHERE status = 'running';
CREATE INDEX scheduler_runs_finished_idx ON scheduler_runs (finished_at) WHERE finished_at IS NOT NULL;
-- Run queries: by task or status, newest first (cursor on id), and by start time.
CREATE INDEX scheduler_runs_task_id_idx ON scheduler_runs (task_name, id DESC);
CREATE INDEX scheduler_runs_status_id_idx ON scheduler_runs (status, id DESC);
CREATE INDEX scheduler_runs_started_idx ON scheduler_runs (started_at);

-- scheduler_tasks only gains columns. SQLite cannot add a table constraint, but a CHECK attached
-- to a column may name other columns (it is checked against every existing row as it is added),
-- so each consistency rule rides on the last column of its group, under PostgreSQL's name.

-- A retry waiting for its time: the tick it retries and the attempt it will be.
ALTER TABLE scheduler_tasks ADD COLUMN retry_at INTEGER;
ALTER TABLE scheduler_tasks ADD COLUMN retry_tick INTEGER;
ALTER TABLE scheduler_tasks ADD COLUMN retry_attempt INTEGER
    CONSTRAINT scheduler_tasks_retry_consistent
    CHECK ((retry_at IS NULL) = (retry_tick IS NULL) AND (retry_at IS NULL) = (retry_attempt IS NULL));
-- A manual run asked for and not started yet, and who asked.
ALTER TABLE scheduler_tasks ADD COLUMN manual_at INTEGER;
ALTER TABLE scheduler_tasks ADD COLUMN manual_by TEXT;
-- The open missed-run incident: since when the task has not run a tick it should have.
ALTER TABLE scheduler_tasks ADD COLUMN missed_since INTEGER;
-- Since when the task is disabled (the skip record of its ticks is written when it is enabled).
ALTER TABLE scheduler_tasks ADD COLUMN disabled_at INTEGER;
-- An operator's pause: no new runs until resumed or until `pause_until`. A reconcile never
-- touches these columns.
ALTER TABLE scheduler_tasks ADD COLUMN paused_at INTEGER;
ALTER TABLE scheduler_tasks ADD COLUMN paused_by TEXT;
ALTER TABLE scheduler_tasks ADD COLUMN pause_reason TEXT;
ALTER TABLE scheduler_tasks ADD COLUMN pause_until INTEGER
    CONSTRAINT scheduler_tasks_pause_consistent
    CHECK ((paused_at IS NULL) = (paused_by IS NULL) AND (paused_at IS NULL) = (pause_reason IS NULL)
           AND (pause_until IS NULL OR paused_at IS NOT NULL));

CREATE INDEX scheduler_tasks_retry_idx ON scheduler_tasks (retry_at) WHERE retry_at IS NOT NULL;
CREATE INDEX scheduler_tasks_manual_idx ON scheduler_tasks (manual_at) WHERE manual_at IS NOT NULL;
CREATE INDEX scheduler_tasks_pause_idx ON scheduler_tasks (pause_until) WHERE paused_at IS NOT NULL;

-- Events to deliver to the webhook, written by the node that saw them, sent once (rows are
-- claimed with a lease), retried with backoff. The payload is the JSON text as written.
CREATE TABLE scheduler_outbox (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    event_type    TEXT NOT NULL,
    payload       TEXT NOT NULL CHECK (json_valid(payload)),
    created_at    INTEGER NOT NULL,
    deliver_after INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    state         TEXT NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'delivered', 'failed', 'disabled')),
    locked_by     TEXT,
    locked_until  INTEGER,
    last_error    TEXT,
    delivered_at  INTEGER
) STRICT;

CREATE INDEX scheduler_outbox_pending_idx ON scheduler_outbox (deliver_after) WHERE state = 'pending';
CREATE INDEX scheduler_outbox_created_idx ON scheduler_outbox (created_at);

-- Every delivery attempt, for the operator.
CREATE TABLE scheduler_webhook_deliveries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    outbox_id   INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    node_id     TEXT NOT NULL,
    at          INTEGER NOT NULL,
    status      INTEGER,
    error       TEXT,
    duration_ms INTEGER NOT NULL
) STRICT;

CREATE INDEX scheduler_webhook_deliveries_outbox_idx ON scheduler_webhook_deliveries (outbox_id);
CREATE INDEX scheduler_webhook_deliveries_at_idx ON scheduler_webhook_deliveries (at);

-- A webhook endpoint that answered 410 Gone is disabled (per URL digest, so a new URL starts
-- enabled).
CREATE TABLE scheduler_webhook_state (
    url_digest      TEXT NOT NULL PRIMARY KEY,
    disabled_at     INTEGER NOT NULL,
    disabled_reason TEXT NOT NULL
) STRICT;

-- Every operator action: who, what, when, from where.
CREATE TABLE scheduler_audit (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    task   TEXT NOT NULL,
    detail TEXT NOT NULL,
    source TEXT NOT NULL
) STRICT;

CREATE INDEX scheduler_audit_at_idx ON scheduler_audit (at);

-- What a handler logged during its run, in chunks written as it went (bounded per run).
CREATE TABLE scheduler_run_logs (
    run_id    INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    text      TEXT NOT NULL,
    lines     INTEGER NOT NULL,
    truncated INTEGER NOT NULL DEFAULT 0 CHECK (truncated IN (0, 1)),
    PRIMARY KEY (run_id, seq)
) STRICT;
