//! The one constructor that picks a store by URL scheme: `postgres://` or `postgresql://` (or
//! libpq's keyword form, `host=... dbname=...`) for [`PgStore`](super::PgStore), `sqlite://PATH` for the embedded [`SqliteStore`](super::SqliteStore);
//! no URL at all means the embedded store at [`DEFAULT_SQLITE_PATH`].
//!
//! Options that only one backend has (a PostgreSQL schema, a pool size) are refused for the
//! other, so a setting is never silently ignored.

use std::sync::Arc;

use super::dsn::is_keyword_form;
use super::{Store, StoreError, StoreResult};
use crate::redact::redact_url;

/// Where the embedded store lives when no database URL is configured.
pub const DEFAULT_SQLITE_PATH: &str = "scheduler.db";

/// What [`connect`] needs: the URL, and the options of the PostgreSQL store.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct StoreSettings {
    /// `postgres://...`, `postgresql://...` or `sqlite://PATH`; `None`: `sqlite://scheduler.db`.
    pub url: Option<String>,
    /// PostgreSQL only: the schema of the tables (`SCHEDULER_SCHEMA`).
    pub schema: Option<String>,
    /// PostgreSQL only: connections in the pool (`SCHEDULER_MAX_CONNECTIONS`).
    pub max_connections: Option<u32>,
    /// PostgreSQL only: a direct URL for the change listener (`SCHEDULER_LISTEN_URL`), for a
    /// database URL that goes through a transaction-mode pooler (`?pgbouncer=true`).
    pub listen_url: Option<String>,
}

impl std::fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSettings")
            .field("url", &self.url.as_deref().map(redact_url))
            .field("schema", &self.schema)
            .field("max_connections", &self.max_connections)
            .field("listen_url", &self.listen_url.as_deref().map(redact_url))
            .finish()
    }
}

impl StoreSettings {
    /// Settings for `url`, every option at its default.
    pub fn url(url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::default()
        }
    }
}

/// The backend a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// PostgreSQL: several nodes.
    Postgres,
    /// An SQLite file: one process.
    Sqlite,
}

/// Which backend `url` names, or why none.
///
/// ```
/// use scheduler::store::{Backend, backend_of};
/// assert_eq!(backend_of("postgres://app@db/jobs").unwrap(), Backend::Postgres);
/// assert_eq!(backend_of("POSTGRESQL://db/jobs").unwrap(), Backend::Postgres);
/// assert_eq!(backend_of("sqlite://scheduler.db").unwrap(), Backend::Sqlite);
/// assert_eq!(backend_of("host=h1,h2 dbname=jobs").unwrap(), Backend::Postgres);
/// assert!(backend_of("mysql://db/jobs").unwrap_err().to_string().contains("postgres://"));
/// ```
pub fn backend_of(url: &str) -> StoreResult<Backend> {
    if is_keyword_form(url) {
        return Ok(Backend::Postgres);
    }
    let scheme = url
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("postgres" | "postgresql") => Ok(Backend::Postgres),
        Some("sqlite") => Ok(Backend::Sqlite),
        _ => Err(StoreError::setup(format!(
            "`{}` is not a database URL the scheduler knows; use postgres://... (or postgresql://) for PostgreSQL, or sqlite://PATH for the embedded store",
            redact_url(url)
        ))),
    }
}

/// The store `settings` describe. Connects to nothing yet (call inside a Tokio runtime).
pub fn connect(settings: &StoreSettings) -> StoreResult<Arc<dyn Store>> {
    let default_url = format!("sqlite://{DEFAULT_SQLITE_PATH}");
    #[cfg(not(feature = "sqlite"))]
    if settings.url.is_none() {
        return Err(StoreError::setup(format!(
            "no database URL is set (SCHEDULER_DATABASE_URL or DATABASE_URL), and the default, \
             `{default_url}`, needs the `sqlite` feature of the scheduler crate, which this build \
             leaves out: give a postgres:// URL"
        )));
    }
    let url = settings.url.as_deref().unwrap_or(&default_url);
    match backend_of(url)? {
        #[cfg(not(feature = "postgres"))]
        Backend::Postgres => Err(feature_missing(url, "postgres")),
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let mut builder = super::PgStore::builder(url);
            if let Some(schema) = &settings.schema {
                builder = builder.schema(schema.clone());
            }
            if let Some(n) = settings.max_connections {
                builder = builder.max_connections(n);
            }
            if let Some(listen_url) = &settings.listen_url {
                builder = builder.listen_url(listen_url.clone());
            }
            Ok(Arc::new(builder.connect_lazy()?))
        }
        Backend::Sqlite => {
            for (name, set) in [
                ("SCHEDULER_SCHEMA", settings.schema.is_some()),
                (
                    "SCHEDULER_MAX_CONNECTIONS",
                    settings.max_connections.is_some(),
                ),
                ("SCHEDULER_LISTEN_URL", settings.listen_url.is_some()),
            ] {
                if set {
                    return Err(StoreError::setup(format!(
                        "{name} only applies to a PostgreSQL database, and the store is `{}`",
                        redact_url(url)
                    )));
                }
            }
            connect_sqlite(url)
        }
    }
}

#[cfg(feature = "sqlite")]
fn connect_sqlite(url: &str) -> StoreResult<Arc<dyn Store>> {
    Ok(Arc::new(super::sqlite::from_url(url)?.connect()?))
}

#[cfg(not(feature = "sqlite"))]
fn connect_sqlite(url: &str) -> StoreResult<Arc<dyn Store>> {
    Err(feature_missing(url, "sqlite"))
}

/// The error for a URL whose backend this build leaves out: it names the Cargo feature to add.
#[cfg(not(all(feature = "postgres", feature = "sqlite")))]
fn feature_missing(url: &str, feature: &str) -> StoreError {
    StoreError::setup(format!(
        "`{}` needs the `{feature}` feature of the scheduler crate, which this build leaves out \
         (add it to the dependency's `features`)",
        redact_url(url)
    ))
}

/// What a build without a backend says (run by CI's minimal-features step).
#[cfg(test)]
mod missing_backend {
    #[cfg(not(feature = "postgres"))]
    #[test]
    fn a_postgres_url_names_the_feature() {
        let settings = super::StoreSettings::url("postgres://app:hunter2@db/app");
        let message = super::connect(&settings)
            .err()
            .expect("refused")
            .to_string();
        assert!(message.contains("`postgres` feature"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
    }

    #[cfg(not(feature = "sqlite"))]
    #[test]
    fn an_sqlite_url_or_none_names_the_feature() {
        let settings = super::StoreSettings::url("sqlite://jobs.db");
        let message = super::connect(&settings)
            .err()
            .expect("refused")
            .to_string();
        assert!(message.contains("`sqlite` feature"), "{message}");
        let message = super::connect(&super::StoreSettings::default())
            .err()
            .expect("refused")
            .to_string();
        assert!(
            message.contains("`sqlite` feature") && message.contains("postgres://"),
            "{message}"
        );
    }
}
