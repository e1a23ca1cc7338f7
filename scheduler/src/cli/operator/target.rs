//! What every operator command shares: the store the arguments name (opened and checked, its
//! errors said with the URL redacted), who is acting, the JSON output, and the refusal error.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::super::table::near_names;
use super::args::{ActorArgs, StoreArgs};
use crate::operate::Actor;
use crate::redact::{redact_text, redact_url};
use crate::store::{Backend, DEFAULT_SQLITE_PATH, Store, StoreSettings, backend_of};
use crate::vars;

/// A node whose last heartbeat is older than this many heartbeat intervals is not alive (the
/// engine's own rule for silent nodes, at the default interval).
pub(super) const ALIVE_WITHIN: Duration =
    Duration::from_secs(crate::engine::DEFAULT_HEARTBEAT_INTERVAL.as_secs() * 3);

/// A refusal or failure of a command, as the error the binary prints.
pub(super) fn fail(message: impl Into<String>) -> crate::Error {
    crate::Error::Command(message.into())
}

/// The store the arguments (or the environment) name, with a check that it can be read.
pub(super) struct Target {
    pub(super) store: Arc<dyn Store>,
    pub(super) shown: String,
}

impl Target {
    pub(super) async fn open(args: &StoreArgs) -> crate::Result<Self> {
        let env = |name: &str| crate::env::process(name).filter(|v| !v.trim().is_empty());
        let url = args
            .database_url
            .clone()
            .or_else(|| env(vars::DATABASE_URL))
            .or_else(|| env(vars::DATABASE_URL_FALLBACK))
            .unwrap_or_else(|| format!("sqlite://{DEFAULT_SQLITE_PATH}"));
        let shown = redact_url(&url);
        let backend = backend_of(&url)?;
        let schema = match backend {
            Backend::Postgres => args.schema.clone().or_else(|| env(vars::SCHEMA)),
            // SCHEDULER_SCHEMA is a PostgreSQL setting: a leftover in the environment does not
            // stop a look at an SQLite file, but `--schema` does.
            _ => args.schema.clone(),
        };
        if backend == Backend::Sqlite {
            let path = url.split_once("://").map_or("", |(_, rest)| rest);
            let path = path.split('?').next().unwrap_or(path);
            if !std::path::Path::new(path).exists() {
                return Err(fail(format!(
                    "no scheduler database at `{shown}` (the file does not exist); give the database with --database-url or DATABASE_URL"
                )));
            }
        }
        let store: Arc<dyn Store> = match backend {
            Backend::Sqlite => {
                if schema.is_some() {
                    return Err(fail(format!(
                        "--schema only applies to a PostgreSQL database, and the store is `{shown}`"
                    )));
                }
                open_sqlite(&url)?
            }
            _ => {
                reach_postgres(&url, &shown).await?;
                let mut settings = StoreSettings::url(url);
                settings.schema = schema;
                settings.max_connections = Some(2);
                crate::store::connect(&settings)?
            }
        };
        let target = Self { store, shown };
        target.check(target.store.nodes().await)?;
        Ok(target)
    }

    /// A store error as the command's error: where, what, and a hint for missing tables.
    pub(super) fn check<T>(&self, result: crate::store::StoreResult<T>) -> crate::Result<T> {
        result.map_err(|error| {
            let text = redact_text(&crate::causes::error_chain(&error));
            let hint = if text.contains("does not exist") || text.contains("no such table") {
                " (no scheduler tables there: a node creates them when it starts; check the URL and --schema)"
            } else {
                ""
            };
            fail(format!(
                "cannot use the scheduler database at `{}`: {text}{hint}",
                self.shown
            ))
        })
    }

    /// An operation's result as the command's: a store error worded as [`check`](Self::check)
    /// words it.
    pub(super) fn check_operation<T>(&self, result: crate::Result<T>) -> crate::Result<T> {
        match result {
            Err(crate::Error::Store(e)) => self.check(Err(e)),
            other => other,
        }
    }

    /// The error for a task the database does not know, with the names near it.
    pub(super) async fn unknown_task(&self, task: &str) -> crate::Error {
        let states = self.store.task_states(None).await.unwrap_or_default();
        let near = near_names(task, states.iter().map(|s| s.name.as_str()));
        if near.is_empty() {
            fail(format!(
                "no task named `{task}` in the database; `scheduler status` lists them"
            ))
        } else {
            fail(format!(
                "no task named `{task}` in the database; did you mean {}?",
                near.iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }
}

/// The SQLite store at `url` in operator mode: beside a node that holds the file (SQLite lets
/// several processes share one WAL file); never migrating, never registering.
#[cfg(feature = "sqlite")]
fn open_sqlite(url: &str) -> crate::Result<Arc<dyn Store>> {
    Ok(Arc::new(
        crate::store::sqlite::from_url(url)?.operator().connect()?,
    ))
}

/// A build without the `sqlite` feature: the store's own error names the feature.
#[cfg(not(feature = "sqlite"))]
fn open_sqlite(url: &str) -> crate::Result<Arc<dyn Store>> {
    Ok(crate::store::connect(&StoreSettings::url(url))?)
}

/// How long the first connection to PostgreSQL may take before the command gives up.
#[cfg(feature = "postgres")]
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects once, as the store's connections do (its builder: the host list and
/// `target_session_attrs`, `pgbouncer=true`, TLS), so an unreachable server is reported by its
/// real cause (refused, unknown host, bad password) rather than as the pool's "timed out while
/// waiting for an open connection"; the URL and the driver's text are redacted.
#[cfg(feature = "postgres")]
async fn reach_postgres(url: &str, shown: &str) -> crate::Result<()> {
    crate::store::PgStore::builder(url)
        .reach(CONNECT_TIMEOUT)
        .await
        .map(drop)
        .map_err(|e| {
            fail(format!(
                "cannot reach the scheduler database at `{shown}`: {}",
                redact_text(&crate::causes::error_chain(&e))
            ))
        })
}

/// A build without the `postgres` feature: nothing to reach (the store's own error names the
/// feature).
#[cfg(not(feature = "postgres"))]
async fn reach_postgres(_url: &str, _shown: &str) -> crate::Result<()> {
    Ok(())
}

pub(super) fn actor(args: &ActorArgs) -> Actor {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let name = args.actor.clone().unwrap_or_else(|| {
        let user = crate::env::process("USER")
            .or_else(|| crate::env::process("USERNAME"))
            .unwrap_or_else(|| "unknown".to_owned());
        format!("{user}@{host}")
    });
    Actor::new(name, format!("cli@{host}"))
}

pub(super) fn to_json(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

pub(super) fn value_of<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
