-- Run policies: timeouts, retries, manual runs, missed-run detection, and the webhook outbox.
-- Never edit a migration after it has landed.

ALTER TABLE scheduler_runs DROP CONSTRAINT scheduler_runs_status_check;
ALTER TABLE scheduler_runs ADD CONSTRAINT scheduler_runs_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'timed_out', 'interrupted', 'lost',
                      'cancelled'));

-- Which attempt at its tick a run is (1: the scheduled run), what started it, and who asked.
ALTER TABLE scheduler_runs ADD COLUMN attempt integer NOT NULL DEFAULT 1 CHECK (attempt >= 1);
ALTER TABLE scheduler_runs ADD COLUMN trigger text NOT NULL DEFAULT 'schedule'
    CHECK (trigger IN ('schedule', 'retry', 'manual'));
ALTER TABLE scheduler_runs ADD COLUMN triggered_by text;

-- A retry waiting for its time: the tick it retries and the attempt it will be.
ALTER TABLE scheduler_tasks ADD COLUMN retry_at timestamptz;
ALTER TABLE scheduler_tasks ADD COLUMN retry_tick timestamptz;
ALTER TABLE scheduler_tasks ADD COLUMN retry_attempt integer;
-- A manual run asked for and not started yet, and who asked.
ALTER TABLE scheduler_tasks ADD COLUMN manual_at timestamptz;
ALTER TABLE scheduler_tasks ADD COLUMN manual_by text;
-- The open missed-run incident: since when the task has not run a tick it should have.
ALTER TABLE scheduler_tasks ADD COLUMN missed_since timestamptz;
-- Since when the task is disabled (the skip record of its ticks is written when it is enabled).
ALTER TABLE scheduler_tasks ADD COLUMN disabled_at timestamptz;
ALTER TABLE scheduler_tasks ADD CONSTRAINT scheduler_tasks_retry_consistent
    CHECK ((retry_at IS NULL) = (retry_tick IS NULL) AND (retry_at IS NULL) = (retry_attempt IS NULL));

CREATE INDEX scheduler_tasks_retry_idx ON scheduler_tasks (retry_at) WHERE retry_at IS NOT NULL;
CREATE INDEX scheduler_tasks_manual_idx ON scheduler_tasks (manual_at) WHERE manual_at IS NOT NULL;

-- Events to deliver to the webhook, written in the transaction that caused them, sent once by
-- one node (rows are claimed with a lease), retried with backoff.
CREATE TABLE scheduler_outbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_type    text NOT NULL,
    payload       jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    deliver_after timestamptz NOT NULL DEFAULT now(),
    attempts      integer NOT NULL DEFAULT 0,
    state         text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'delivered', 'failed', 'disabled')),
    locked_by     text,
    locked_until  timestamptz,
    last_error    text,
    delivered_at  timestamptz
);

CREATE INDEX scheduler_outbox_pending_idx ON scheduler_outbox (deliver_after) WHERE state = 'pending';
CREATE INDEX scheduler_outbox_created_idx ON scheduler_outbox (created_at);

-- Every delivery attempt, for the operator.
CREATE TABLE scheduler_webhook_deliveries (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_id   bigint NOT NULL,
    attempt     integer NOT NULL,
    node_id     text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    status      integer,
    error       text,
    duration_ms integer NOT NULL
);

CREATE INDEX scheduler_webhook_deliveries_outbox_idx ON scheduler_webhook_deliveries (outbox_id);
CREATE INDEX scheduler_webhook_deliveries_at_idx ON scheduler_webhook_deliveries (at);

-- A webhook endpoint that answered 410 Gone is disabled for every node (per URL digest, so a
-- new URL starts enabled).
CREATE TABLE scheduler_webhook_state (
    url_digest      text PRIMARY KEY,
    disabled_at     timestamptz NOT NULL DEFAULT now(),
    disabled_reason text NOT NULL
);
