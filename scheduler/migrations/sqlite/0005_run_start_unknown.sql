-- A run's `started_at` is when its handler started, recorded with the run's end (the node's
-- measured start); NULL for a run whose handler never started (claimed ahead of its tick and
-- handed over at shutdown, or cancelled before its tick). Until its end a running run carries
-- the start its claim planned (its tick, or the claim's time), and a run recorded `lost` keeps
-- that planned start: whether its handler started is unknown.
-- Never edit a migration after it has landed.

-- SQLite cannot drop a NOT NULL, so the table is rebuilt the documented way, as in 0002:
-- create the new table, copy the rows, drop the old one, rename the new one, recreate the
-- indexes (under their names, so queries and plans stay the same). No view, trigger or
-- foreign key refers to it.
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
        CHECK (trigger IN ('schedule', 'retry', 'manual')),
    triggered_by        TEXT,
    cancel_requested_at INTEGER,
    cancel_requested_by TEXT
) STRICT;

INSERT INTO scheduler_runs_new (id, task_name, scheduled_at, started_at, finished_at, status,
                                node_id, lock_token, ticks_collapsed, error, recovery, attempt,
                                trigger, triggered_by, cancel_requested_at, cancel_requested_by)
SELECT id, task_name, scheduled_at, started_at, finished_at, status, node_id, lock_token,
       ticks_collapsed, error, recovery, attempt, trigger, triggered_by, cancel_requested_at,
       cancel_requested_by
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
