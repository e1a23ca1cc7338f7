-- Backfills: an operator's request to run a task's past ticks again, the same tables as
-- PostgreSQL's 0012 (see there). SQLite cannot change a CHECK, so the runs table is rebuilt the
-- documented way, as in 0005 (with every column since), to allow trigger `backfill`.
-- Never edit a migration after it has landed.
CREATE TABLE scheduler_runs_new (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    task_name           TEXT NOT NULL,
    scheduled_at        INTEGER NOT NULL,
    started_at          INTEGER,
    finished_at         INTEGER,
    status              TEXT NOT NULL
        CONSTRAINT scheduler_runs_status_check
        CHECK (status IN ('running', 'succeeded', 'failed', 'timed_out', 'interrupted', 'lost',
                          'cancelled')),
    node_id             TEXT NOT NULL,
    lock_token          TEXT NOT NULL,
    ticks_collapsed     INTEGER NOT NULL DEFAULT 0,
    error               TEXT,
    recovery            TEXT NOT NULL DEFAULT 'rerun' CHECK (recovery IN ('rerun', 'never')),
    attempt             INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    trigger             TEXT NOT NULL DEFAULT 'schedule'
        CHECK (trigger IN ('schedule', 'retry', 'manual', 'backfill')),
    triggered_by        TEXT,
    cancel_requested_at INTEGER,
    cancel_requested_by TEXT,
    fencing_token       INTEGER
) STRICT;

INSERT INTO scheduler_runs_new (id, task_name, scheduled_at, started_at, finished_at, status,
                                node_id, lock_token, ticks_collapsed, error, recovery, attempt,
                                trigger, triggered_by, cancel_requested_at, cancel_requested_by,
                                fencing_token)
SELECT id, task_name, scheduled_at, started_at, finished_at, status, node_id, lock_token,
       ticks_collapsed, error, recovery, attempt, trigger, triggered_by, cancel_requested_at,
       cancel_requested_by, fencing_token
FROM scheduler_runs;

-- Keep AUTOINCREMENT's promise across the rebuild (see 0002).
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
CREATE INDEX scheduler_runs_task_id_idx ON scheduler_runs (task_name, id DESC);
CREATE INDEX scheduler_runs_status_id_idx ON scheduler_runs (status, id DESC);
CREATE INDEX scheduler_runs_started_idx ON scheduler_runs (started_at);
CREATE INDEX scheduler_runs_trigger_id_idx ON scheduler_runs (trigger, id DESC);
CREATE INDEX scheduler_runs_cancel_requested_idx ON scheduler_runs (id)
    WHERE cancel_requested_at IS NOT NULL;

CREATE TABLE scheduler_backfills (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    task_name    TEXT NOT NULL,
    range_from   INTEGER NOT NULL,
    range_to     INTEGER NOT NULL,
    all_ticks    INTEGER NOT NULL CHECK (all_ticks IN (0, 1)),
    max_runs     INTEGER NOT NULL CHECK (max_runs >= 1),
    concurrency  INTEGER NOT NULL CHECK (concurrency >= 1),
    pace_ms      INTEGER NOT NULL CHECK (pace_ms >= 0),
    requested_by TEXT NOT NULL,
    requested_at INTEGER NOT NULL,
    cancelled_at INTEGER,
    cancelled_by TEXT
) STRICT;
CREATE INDEX scheduler_backfills_task_idx ON scheduler_backfills (task_name, id DESC);

CREATE TABLE scheduler_backfill_ticks (
    backfill_id INTEGER NOT NULL REFERENCES scheduler_backfills (id) ON DELETE CASCADE,
    tick        INTEGER NOT NULL,
    run_id      INTEGER,
    PRIMARY KEY (backfill_id, tick)
) STRICT;
CREATE INDEX scheduler_backfill_ticks_pending_idx ON scheduler_backfill_ticks (backfill_id, tick)
    WHERE run_id IS NULL;

ALTER TABLE scheduler_tasks ADD COLUMN backfill_id INTEGER;
ALTER TABLE scheduler_tasks ADD COLUMN backfill_at INTEGER;
CREATE INDEX scheduler_tasks_backfill_idx ON scheduler_tasks (backfill_at)
    WHERE backfill_at IS NOT NULL;
