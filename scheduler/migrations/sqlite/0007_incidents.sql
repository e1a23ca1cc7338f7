-- One incident per problem: the alerts about a task fold into one open incident per (task,
-- alert type) until the task recovers (`closed_at`). `count` alerts folded, the latest at
-- `last_seen_at`, its body in `summary`; `last_key` names what the latest was about (a tick, a
-- run, a deadline) so the same thing seen twice counts once. `notified_at` is when its alert
-- was first sent (NULL: held back, by `sla.alert_after_failures` or a snooze); reminders go
-- every `remind_every_ms` while it stays open. Times in microseconds since the epoch.
-- Snoozes: a task's alerts are recorded but not sent until `until`.
-- Alert marks: which (task, type, key) was raised already (a late tick, a missed deadline).
-- Never edit a migration after it has landed.
CREATE TABLE scheduler_incidents (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    task_name       TEXT NOT NULL,
    kind            TEXT NOT NULL,
    opened_at       INTEGER NOT NULL,
    last_seen_at    INTEGER NOT NULL,
    count           INTEGER NOT NULL DEFAULT 1,
    last_key        TEXT,
    summary         TEXT NOT NULL,
    notified_at     INTEGER,
    remind_every_ms INTEGER,
    reminded_at     INTEGER,
    reminders       INTEGER NOT NULL DEFAULT 0,
    closed_at       INTEGER,
    closed_by       TEXT
) STRICT;

CREATE UNIQUE INDEX scheduler_incidents_open_idx ON scheduler_incidents (task_name, kind)
    WHERE closed_at IS NULL;
CREATE INDEX scheduler_incidents_closed_idx ON scheduler_incidents (closed_at)
    WHERE closed_at IS NOT NULL;

CREATE TABLE scheduler_snoozes (
    task_name   TEXT PRIMARY KEY,
    until       INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    snoozed_by  TEXT NOT NULL,
    snoozed_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE scheduler_alert_marks (
    task_name  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    mark       TEXT NOT NULL,
    marked_at  INTEGER NOT NULL,
    PRIMARY KEY (task_name, kind, mark)
) STRICT;
