-- One incident per problem: the alerts about a task fold into one open incident per (task,
-- alert type) until the task recovers (`closed_at`). `count` alerts folded, the latest at
-- `last_seen_at`, its body in `summary`; `last_key` names what the latest was about (a tick, a
-- run, a deadline) so the same thing seen twice counts once. `notified_at` is when its alert
-- was first sent (NULL: held back, by `sla.alert_after_failures` or a snooze); reminders go
-- every `remind_every_ms` while it stays open.
-- Snoozes: a task's alerts are recorded but not sent until `until`.
-- Alert marks: which (task, type, key) a node has raised already (a late tick, a missed
-- deadline), so one node raises each.
-- Never edit a migration after it has landed.
CREATE TABLE scheduler_incidents (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_name       text NOT NULL,
    kind            text NOT NULL,
    opened_at       timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    count           bigint NOT NULL DEFAULT 1,
    last_key        text,
    summary         text NOT NULL,
    notified_at     timestamptz,
    remind_every_ms bigint,
    reminded_at     timestamptz,
    reminders       bigint NOT NULL DEFAULT 0,
    closed_at       timestamptz,
    closed_by       text
);

CREATE UNIQUE INDEX scheduler_incidents_open_idx ON scheduler_incidents (task_name, kind)
    WHERE closed_at IS NULL;
CREATE INDEX scheduler_incidents_closed_idx ON scheduler_incidents (closed_at)
    WHERE closed_at IS NOT NULL;

CREATE TABLE scheduler_snoozes (
    task_name   text PRIMARY KEY,
    until       timestamptz NOT NULL,
    reason      text NOT NULL,
    snoozed_by  text NOT NULL,
    snoozed_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE scheduler_alert_marks (
    task_name  text NOT NULL,
    kind       text NOT NULL,
    mark       text NOT NULL,
    marked_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_name, kind, mark)
);
