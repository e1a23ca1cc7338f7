//! # scheduler
//!
//! Reliable business cron tasks on one or many machines. Tasks are written as code with
//! [`#[task]`](macro@task), steered by an external, hot-reloaded config (which tasks are enabled and
//! on what schedule), and coordinated through PostgreSQL so that every tick runs exactly once across
//! all nodes.
//!
//! ```no_run
//! use scheduler::{task, TaskContext};
//!
//! #[task(name = "syncAdvertiserReport")]
//! async fn sync_advertiser_report(ctx: TaskContext) -> anyhow::Result<()> {
//!     tracing::info!(tick = %ctx.scheduled_at(), "syncing");
//!     Ok(())
//! }
//!
//! #[tokio::main]
//! async fn main() -> scheduler::Result<()> {
//!     scheduler::run().await
//! }
//! ```
//!
//! # Cargo features
//!
//! An application pays only for what it uses. The defaults are everything the README's
//! quickstart uses; `default-features = false` and a list gives the rest:
//!
//! | feature | brings | without it |
//! |---|---|---|
//! | `postgres` (default) | [`store::PgStore`]: several nodes, TLS on rustls | a `postgres://` URL is an error naming the feature |
//! | `sqlite` (default) | [`store::SqliteStore`]: one process, SQLite built from its bundled C sources | a `sqlite://` URL (and no URL at all) is an error naming the feature |
//! | `admin` (default) | [`admin`]: the HTTP API, OpenAPI document, `/metrics`, probes and dashboard (axum); [`SchedulerBuilder::admin_addr`] | `SCHEDULER_ADMIN_ADDR` is an error naming the feature; [`Scheduler::metrics`] still counts |
//! | `http-config` (default) | [`config::HttpSource`]: the task config over HTTP(S) (reqwest on rustls) | an `http(s)://` config location is an error naming the feature; files and [`config::ConfigSource`] work |
//! | `webhook` (default) | [`webhook`] and [`channels`]: alerts posted to a signed webhook and to Slack, Feishu/Lark, DingTalk and WeCom robots (reqwest on rustls), routed by event, owner and label; [`SchedulerBuilder::webhook`], [`SchedulerBuilder::channels`] | `SCHEDULER_WEBHOOK_URL` is an error naming the feature; [`events`] still reach code |
//! | `email` (default) | e-mail alerts, a kind of [`channels`] channel: SMTP with STARTTLS (lettre on rustls); turns on `webhook` | an e-mail channel in the channels file is refused, naming the feature |
//! | `cli` (default) | [`cli`] (clap): the `scheduler` binary, and the commands of [`run`] (`myapp status`, `check-config`, ...) | [`run`] ignores its arguments and runs the node |
//! | `otel` | the `otel` module: each run as a span and the metrics exported over OTLP (gRPC or HTTP/protobuf, rustls), configured by the standard `OTEL_*` variables | the `OTEL_*` variables are not read; [`Scheduler::metrics`] and `/metrics` still count |
//!
//! The engine, the schedules, the config (files, custom sources, hot reload), the events, the
//! metrics, the per-run logs and process isolation are always there. An application with the
//! engine on PostgreSQL and nothing else:
//!
//! ```toml
//! scheduler = { version = "0.1", default-features = false, features = ["postgres"] }
//! ```
//!
//! The crate is organised one module per concept, in layers; a module imports only from its own
//! layer or those below it:
//!
//! 1. the words everything shares: [`schedule`], [`policy`], [`registry`], [`TaskContext`],
//!    [`metrics`], `redact`, `vars` (every environment variable's name), the reader of
//!    those variables, the range of every value a user sets (`bounds`), an error's causes
//!    written on one line, the wall clock decisions are made by (`clock`: the system's, or a
//!    test's), the row names, limits and refusals of a task's instances (`instance`), and
//!    the rule of limits shared by tasks (`limits`: which runs a claim may start);
//! 2. [`store`]: the run state, behind the [`Store`](store::Store) trait;
//! 3. rules and records above the store that run nothing: the tick rules (what is due, missed,
//!    skipped), [`config`], [`events`], [`webhook`], `otel`, [`run_log`], and the crate's [`Error`];
//! 4. what the engine and operators act through: `reconciler` (applies the config),
//!    `operate` (operator actions), `isolation` (a handler in a child process), [`Schedules`]
//!    (a task's instances made at run time);
//! 5. `engine`: claims, runs and records every due tick;
//! 6. [`admin`] (which sees the engine through one narrow view) and [`cli`];
//! 7. the composition root, apart from the engine: [`SchedulerBuilder`] builds a
//!    [`Scheduler`], which starts the engine and the admin server side by side; [`run`] is the
//!    application entry.
//!
//! The modules named without a link are internal: an application uses the root and the public
//! modules (`scripts/public-api` checks that list against `scheduler/public-api.txt`).
//!
//! A task needs only [`task`] and [`TaskContext`]; an application, the root. There is no import
//! cycle between modules: the crate's [`Error`] wraps the errors of the modules below it and none
//! of them names it (an invalid environment variable is the reader's own error until it reaches
//! the boundary as [`Error::InvalidSetting`]). `scripts/module-graph` checks the layers and lists
//! the cycles.

#![warn(missing_docs)]
// docs.rs (`--cfg docsrs`, nightly): each item gated by a feature says which.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "admin")]
pub mod admin;
mod app;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
mod backfill;
mod bounds;
mod builder;
mod causes;
#[cfg(feature = "webhook")]
pub mod channels;
#[cfg(feature = "cli")]
pub mod cli;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
mod clock;
pub mod config;
mod context;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
mod engine;
mod env;
mod error;
pub mod events;
mod instance;
mod isolation;
mod limits;
pub mod metrics;
mod node;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
mod operate;
#[cfg(feature = "otel")]
pub mod otel;
pub mod policy;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
mod reconciler;
mod redact;
pub mod registry;
pub mod run_log;
pub mod schedule;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
mod schedules;
mod shard;
pub mod store;
mod ticks;
mod vars;
#[cfg(feature = "webhook")]
pub mod webhook;

pub use app::{init_tracing, run, shutdown_signal};
pub use builder::SchedulerBuilder;
pub use context::{ArgsError, Interrupted, MissingState, TaskContext};
pub use error::{Error, Result};
pub use instance::InstanceRefusal;
pub use isolation::{ChildRequest, child_request, run_child};
pub use node::Scheduler;
pub use policy::{Isolation, Misfire, Recovery};
pub use registry::{TaskDescriptor, TaskRegistry};
pub use run_log::layer as run_log_layer;
pub use schedule::ScheduleSpec;
pub use scheduler_macros::task;
pub use schedules::{Instance, JitterWindow, Schedule, Schedules};
pub use shard::Shard;

/// Not public API: the crate's internals that its own tests, benchmarks and fault scenarios
/// reach from outside the crate (`tests/`, `bench/`, `faults/`).
///
/// Nothing here is part of the scheduler's interface: it may change or go in any release,
/// without a semver promise. Applications use the crate root and its public modules. Each
/// module below mirrors the internal module of the same name and re-exports only what those
/// crates use.
#[doc(hidden)]
pub mod testing {
    /// The internal backfill planning.
    pub mod backfill {
        pub use crate::backfill::{
            BackfillRefusal, BackfillRequest, DEFAULT_MAX_RUNS, RunCap, parse_bound, plan_ticks,
        };
    }

    /// The wall clock the engine and the SQLite store decide by, moved by a test.
    ///
    /// Give one [`TestClock`](clock::TestClock) to the SQLite store
    /// (`SqliteStoreBuilder::test_clock`) and to each node on it
    /// (`SchedulerBuilder::test_clock`); [`TestClock::step`](clock::TestClock::step) then moves
    /// time forward and returns once every node has claimed at the new time. PostgreSQL decides
    /// by its own `now()`: there the clock moves only the engine's own judgements, so tests on
    /// PostgreSQL wait on the wall clock.
    pub mod clock {
        pub use crate::clock::TestClock;
    }

    /// The engine's constants.
    pub mod engine {
        pub use crate::engine::FAIL_STOP_EXIT_CODE;
    }

    /// A handler in a child process.
    pub mod isolation {
        pub use crate::isolation::{ChildCommand, ChildExit, ChildRun, RunIdentity};
    }

    /// Operator actions.
    pub mod operate {
        pub use crate::operate::{
            Actor, PauseRefusal, SnoozeRefusal, backfill, cancel, cancel_backfill, check_override,
            check_pause, check_snooze, pause, resume, trigger, trigger_with,
        };
    }

    /// Redaction of secrets in text.
    pub mod redact {
        pub use crate::redact::{hide_secret_values, redact_args, redact_args_text, redact_text};
    }

    /// The reconciler.
    pub mod reconciler {
        pub use crate::reconciler::Reconciler;
    }

    /// When a jittered tick starts (see `ticks::jitter`).
    pub mod jitter {
        pub use crate::ticks::jitter::{offset, start_of};
    }

    /// An instance's row names.
    pub mod instance {
        pub use crate::instance::{row_name, split_row};
    }

    /// Sharding's rules.
    pub mod shard {
        pub use crate::shard::{
            SPREAD_GRACE, ShardFacts, broadcast_shard, group_row, is_task_row, may_take, node_row,
            row_name, row_node, split_row,
        };
    }

    /// The store's engine protocol: the argument and result types of [`Store`]'s operations,
    /// and `StoreLayer`, the seam for wrapping a store.
    ///
    /// [`Store`]: crate::store::Store
    pub mod store {
        pub use crate::store::backfill::{BackfillCancel, BackfillRecord};
        pub use crate::store::claim::{
            ClaimOutcome, ClaimPlan, ClaimRequest, ClaimRules, ClaimedRun, DueDecision, DueTask,
            ExpiredLock, FailureCount, LastRun, LockKey, NextRun, Renewal, Requeue, RescueDecision,
            RunEnd, RunFinish, WakeInfo,
        };
        pub use crate::store::config::{
            ConfigPlan, ConfigSnapshot, ConfigState, TaskChange, TaskRow,
        };
        pub use crate::store::database::{DatabaseServer, Replication};
        pub use crate::store::history::{
            LogChunk, RunQuery, RunRecord, RunStatus, SkipRecord, Trigger,
        };
        pub use crate::store::incidents::{
            AlertFold, AlertMark, FoldDecision, FoldInput, IncidentClose, IncidentQuery,
            IncidentRecord, Snooze,
        };
        pub use crate::store::instances::{
            InstanceFacts, InstancePlan, InstanceRecord, InstanceTags, InstanceTask,
            InstanceUpsert, InstanceWrite,
        };
        pub use crate::store::layer::StoreLayer;
        pub use crate::store::limits::{LimitHolder, LimitState, LimitWaiter};
        pub use crate::store::nodes::{NodeInfo, OverdueTask};
        pub use crate::store::operator::{
            AuditEntry, CancelRequest, Pause, ResumePlan, RunRequest, TaskState,
        };
        pub use crate::store::outbox::{Delivery, DeliveryNext, NewEvent};
    }
}

/// Not public API: the paths the `#[task]` expansion names.
///
/// Everything here may change in any release; only the macro may use it.
#[doc(hidden)]
pub mod __private {
    pub use crate::policy::{Isolation, Misfire, Recovery};
    pub use crate::registry::{IntoTaskResult, TaskFuture, TaskOptions};
    pub use crate::{TaskContext, TaskDescriptor};
    pub use inventory;
    pub use std::boxed::Box;

    /// Asserts at the attribute's span that a handler's future is `Send + 'static`.
    pub fn assert_send<F: core::future::Future + Send + 'static>(f: F) -> F {
        f
    }

    /// Boxes a handler's future, converting its output with `convert`.
    ///
    /// The conversion is passed in (rather than required as a bound here) so that the macro can
    /// place the `IntoTaskResult` check at the return type's span. The `Send` bound repeats
    /// [`assert_send`]'s; the macro gives both calls the same span, so rustc reports a future
    /// that is not `Send` once.
    pub fn task_future<F>(
        future: F,
        convert: fn(F::Output) -> Result<(), crate::registry::TaskError>,
    ) -> TaskFuture
    where
        F: core::future::Future + Send + 'static,
    {
        Box::pin(async move { convert(future.await) })
    }
}
