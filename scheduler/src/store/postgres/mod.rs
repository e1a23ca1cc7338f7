//! The PostgreSQL store. All of its SQL is in `queries/*.sql`, included at compile time; every
//! value is a bound parameter. The schema is selected per connection (`search_path` as a startup
//! option), so the queries name tables without a schema.

mod migrate;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::{
    ApplyOutcome, ChangeListener, ClaimPlan, ClaimedRun, ConfigState, DueTask, Heartbeat, NodeInfo,
    Planner, RescuedLock, RunOutcome, RunRecord, Store, StoreResult, TaskChange, TaskRow, WakeInfo,
};

/// Default connection pool size of a node.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;
/// Default Postgres schema.
pub const DEFAULT_SCHEMA: &str = "public";

macro_rules! query {
    ($file:literal) => {
        include_str!(concat!("queries/", $file, ".sql"))
    };
}

/// Milliseconds of a duration as the `int8` the queries multiply by `interval '1 millisecond'`.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Quotes an SQL identifier (for `CREATE SCHEMA`, where no parameter can be bound).
pub(crate) fn quote_ident(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// Removes the password from a database URL, for logs and error messages.
///
/// ```
/// use scheduler::store::postgres::redact_url;
/// assert_eq!(
///     redact_url("postgres://app:s3cret@db.internal:5432/jobs"),
///     "postgres://app:***@db.internal:5432/jobs"
/// );
/// assert_eq!(redact_url("postgres://db/jobs?password=x&sslmode=require"), "postgres://db/jobs?password=***&sslmode=require");
/// ```
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                let pass_start = rest_start + colon + 1;
                out.replace_range(pass_start..rest_start + at, "***");
            }
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let redacted: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_owned(),
            })
            .collect();
        out = format!("{head}{}", redacted.join("&"));
    }
    out
}

/// The PostgreSQL implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    schema: String,
    channel: String,
}

impl PgStore {
    /// Connects lazily to `url`, using tables in `schema` (created by [`Store::migrate`]).
    ///
    /// No connection is made until the first query, so a node can start while the database is
    /// down and catch up when it returns.
    pub fn connect_lazy(url: &str, schema: &str, max_connections: u32) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(url)?
            .options([("search_path", schema)])
            .application_name("scheduler");
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            // Warm connections: opening one costs more than a whole claim.
            .min_connections(max_connections.min(2))
            .acquire_timeout(Duration::from_secs(5))
            .idle_timeout(Some(Duration::from_secs(600)))
            .test_before_acquire(false)
            .connect_lazy_with(options);
        Ok(Self::from_pool(pool, schema))
    }

    /// Wraps a pool whose connections already use `schema` as their `search_path`.
    pub fn from_pool(pool: PgPool, schema: &str) -> Self {
        Self {
            pool,
            schema: schema.to_owned(),
            channel: notify_channel(schema),
        }
    }

    /// The pool (for the application's own queries against run history).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The schema the tables live in.
    pub fn schema(&self) -> &str {
        &self.schema
    }
}

/// The NOTIFY channel of one schema's scheduler (channels are per database, so per schema here).
fn notify_channel(schema: &str) -> String {
    let mut channel = format!("scheduler_{schema}");
    channel.truncate(63);
    channel
}

struct PgChangeListener {
    pool: PgPool,
    channel: String,
    listener: Option<PgListener>,
}

#[async_trait]
impl ChangeListener for PgChangeListener {
    async fn recv(&mut self) -> StoreResult<()> {
        if self.listener.is_none() {
            let mut listener = PgListener::connect_with(&self.pool).await?;
            listener.listen(&self.channel).await?;
            self.listener = Some(listener);
            // Whatever happened while we were not listening may have been a change.
            return Ok(());
        }
        let listener = self.listener.as_mut().expect("checked above");
        match listener.try_recv().await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => {
                // The connection was lost; sqlx reconnects (and re-listens) on the next call.
                Ok(())
            }
            Err(e) => {
                self.listener = None;
                Err(e)
            }
        }
    }
}

#[async_trait]
impl Store for PgStore {
    async fn migrate(&self) -> StoreResult<()> {
        migrate::run(&self.pool, &self.schema).await
    }

    async fn register_node(&self, node: &NodeInfo) -> StoreResult<()> {
        sqlx::query(query!("register_node"))
            .bind(&node.node_id)
            .bind(&node.hostname)
            .bind(i32::try_from(node.pid).unwrap_or(i32::MAX))
            .bind(&node.version)
            .bind(&node.tasks)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn heartbeat(&self, node_id: &str, silent_after: Duration) -> StoreResult<Heartbeat> {
        let row = sqlx::query(query!("heartbeat"))
            .bind(node_id)
            .bind(millis(silent_after))
            .fetch_one(&self.pool)
            .await?;
        Ok(Heartbeat {
            registered: row.try_get("registered")?,
            silent: row.try_get("silent")?,
        })
    }

    async fn deregister_node(&self, node_id: &str) -> StoreResult<()> {
        sqlx::query(query!("deregister_node"))
            .bind(node_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn next_wake(&self, tasks: &[String]) -> StoreResult<WakeInfo> {
        let row = sqlx::query(query!("next_wake"))
            .bind(tasks)
            .fetch_one(&self.pool)
            .await?;
        Ok(WakeInfo {
            db_now: row.try_get("db_now")?,
            wake_at: row.try_get("wake_at")?,
        })
    }

    async fn claim_due(
        &self,
        node_id: &str,
        tasks: &[String],
        limit: usize,
        lock_lifetime: Duration,
        planner: &Planner<'_>,
    ) -> StoreResult<(Vec<RescuedLock>, Vec<ClaimedRun>)> {
        let mut tx = self.pool.begin().await?;
        let rescued = sqlx::query(query!("rescue_expired"))
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|row| {
                Ok(RescuedLock {
                    task_name: row.try_get("name")?,
                    previous_owner: row.try_get("lock_owner")?,
                    lost_run_id: row.try_get("lost_run_id")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        if limit == 0 {
            tx.commit().await?;
            return Ok((rescued, Vec::new()));
        }
        let due = sqlx::query(query!("claim_select"))
            .bind(tasks)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&mut *tx)
            .await?;
        if due.is_empty() {
            tx.commit().await?;
            return Ok((rescued, Vec::new()));
        }
        let n = due.len();
        let (mut names, mut tokens, mut scheduled, mut next, mut collapsed) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for row in &due {
            let task = DueTask {
                name: row.try_get("name")?,
                cron: row.try_get("cron")?,
                timezone: row.try_get("timezone")?,
                next_run_at: row.try_get("next_run_at")?,
            };
            let db_now: DateTime<Utc> = row.try_get("db_now")?;
            let ClaimPlan {
                scheduled_at,
                next_run_at,
                ticks_collapsed,
            } = planner(&task, db_now);
            names.push(task.name);
            tokens.push(Uuid::new_v4());
            scheduled.push(scheduled_at);
            next.push(next_run_at);
            collapsed.push(ticks_collapsed);
        }
        let claimed = sqlx::query(query!("claim_apply"))
            .bind(node_id)
            .bind(millis(lock_lifetime))
            .bind(&names)
            .bind(&tokens)
            .bind(&scheduled)
            .bind(&next)
            .bind(&collapsed)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|row| {
                Ok(ClaimedRun {
                    run_id: row.try_get("id")?,
                    task_name: row.try_get("task_name")?,
                    lock_token: row.try_get("lock_token")?,
                    scheduled_at: row.try_get("scheduled_at")?,
                    ticks_collapsed: row.try_get("ticks_collapsed")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        tx.commit().await?;
        Ok((rescued, claimed))
    }

    async fn renew_locks(
        &self,
        node_id: &str,
        held: &[(String, Uuid)],
        lock_lifetime: Duration,
    ) -> StoreResult<Vec<(String, Uuid)>> {
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let (names, tokens): (Vec<&str>, Vec<Uuid>) = held
            .iter()
            .map(|(name, token)| (name.as_str(), *token))
            .unzip();
        sqlx::query(query!("renew_locks"))
            .bind(node_id)
            .bind(millis(lock_lifetime))
            .bind(&names)
            .bind(&tokens)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| Ok((row.try_get("name")?, row.try_get("lock_token")?)))
            .collect()
    }

    async fn finish_runs(&self, outcomes: &[RunOutcome]) -> StoreResult<Vec<String>> {
        if outcomes.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = outcomes.iter().map(|o| o.run_id).collect();
        let names: Vec<&str> = outcomes.iter().map(|o| o.task_name.as_str()).collect();
        let tokens: Vec<Uuid> = outcomes.iter().map(|o| o.lock_token).collect();
        let statuses: Vec<&str> = outcomes.iter().map(|o| o.status.as_str()).collect();
        let errors: Vec<Option<&str>> = outcomes.iter().map(|o| o.error.as_deref()).collect();
        let hand_over: Vec<Option<DateTime<Utc>>> = outcomes.iter().map(|o| o.hand_over).collect();
        sqlx::query(query!("finish_runs"))
            .bind(&ids)
            .bind(&names)
            .bind(&tokens)
            .bind(&statuses)
            .bind(&errors)
            .bind(&hand_over)
            .bind(&self.channel)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| row.try_get("name"))
            .collect()
    }

    async fn prune_runs(&self, retention: Duration) -> StoreResult<u64> {
        let done = sqlx::query(query!("prune_runs"))
            .bind(millis(retention))
            .execute(&self.pool)
            .await?;
        sqlx::query(query!("prune_nodes"))
            .bind(millis(retention))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn load_tasks(&self) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)> {
        let rows = sqlx::query(query!("load_tasks"))
            .fetch_all(&self.pool)
            .await?;
        let db_now = match rows.first() {
            Some(row) => row.try_get("db_now")?,
            None => sqlx::query(query!("db_now"))
                .fetch_one(&self.pool)
                .await?
                .try_get("db_now")?,
        };
        let tasks = rows
            .iter()
            .map(|row| {
                Ok(TaskRow {
                    name: row.try_get("name")?,
                    cron: row.try_get("cron")?,
                    timezone: row.try_get("timezone")?,
                    enabled: row.try_get("enabled")?,
                    next_run_at: row.try_get("next_run_at")?,
                    orphaned_since: row.try_get("orphaned_since")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((db_now, tasks))
    }

    async fn config_state(&self) -> StoreResult<Option<ConfigState>> {
        let row = sqlx::query(query!("config_state"))
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            Ok(ConfigState {
                version: row.try_get("version")?,
                digest: row.try_get("digest")?,
                applied_by: row.try_get("applied_by")?,
            })
        })
        .transpose()
    }

    async fn apply_config(
        &self,
        state: &ConfigState,
        changes: &[TaskChange],
    ) -> StoreResult<ApplyOutcome> {
        let mut tx = self.pool.begin().await?;
        let current: Option<i64> = sqlx::query(query!("config_state_lock"))
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        if let (Some(current), Some(version)) = (current, state.version)
            && version < current
        {
            tx.rollback().await?;
            return Ok(ApplyOutcome::Stale { current });
        }
        let mut create = TaskColumns::default();
        let mut update = TaskColumns::default();
        let (mut orphan_names, mut orphan_flags) = (Vec::new(), Vec::new());
        for change in changes {
            match change {
                TaskChange::Create {
                    name,
                    cron,
                    timezone,
                    enabled,
                    next_run_at,
                } => create.push(name, cron, timezone, *enabled, *next_run_at),
                TaskChange::Update {
                    name,
                    cron,
                    timezone,
                    enabled,
                    next_run_at,
                } => update.push(name, cron, timezone, *enabled, *next_run_at),
                TaskChange::Orphaned { name, orphaned } => {
                    orphan_names.push(name.clone());
                    orphan_flags.push(*orphaned);
                }
            }
        }
        if !create.names.is_empty() {
            create
                .bind(sqlx::query(query!("tasks_create")))
                .execute(&mut *tx)
                .await?;
        }
        if !update.names.is_empty() {
            update
                .bind(sqlx::query(query!("tasks_update")))
                .execute(&mut *tx)
                .await?;
        }
        if !orphan_names.is_empty() {
            sqlx::query(query!("tasks_orphaned"))
                .bind(&orphan_names)
                .bind(&orphan_flags)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(query!("config_state_save"))
            .bind(state.version)
            .bind(&state.digest)
            .bind(&state.applied_by)
            .execute(&mut *tx)
            .await?;
        sqlx::query(query!("notify"))
            .bind(&self.channel)
            .bind("config")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(ApplyOutcome::Applied)
    }

    async fn recent_runs(
        &self,
        task_name: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<RunRecord>> {
        sqlx::query(query!("recent_runs"))
            .bind(task_name)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| {
                Ok(RunRecord {
                    id: row.try_get("id")?,
                    task_name: row.try_get("task_name")?,
                    scheduled_at: row.try_get("scheduled_at")?,
                    started_at: row.try_get("started_at")?,
                    finished_at: row.try_get("finished_at")?,
                    status: row.try_get("status")?,
                    node_id: row.try_get("node_id")?,
                    ticks_collapsed: row.try_get("ticks_collapsed")?,
                    error: row.try_get("error")?,
                })
            })
            .collect()
    }

    async fn listener(&self) -> StoreResult<Box<dyn ChangeListener>> {
        Ok(Box::new(PgChangeListener {
            pool: self.pool.clone(),
            channel: self.channel.clone(),
            listener: None,
        }))
    }
}

/// Parallel arrays for the `unnest` of tasks_create / tasks_update.
#[derive(Default)]
struct TaskColumns {
    names: Vec<String>,
    crons: Vec<String>,
    zones: Vec<String>,
    enabled: Vec<bool>,
    next: Vec<Option<DateTime<Utc>>>,
}

impl TaskColumns {
    fn push(
        &mut self,
        name: &str,
        cron: &str,
        zone: &str,
        enabled: bool,
        next: Option<DateTime<Utc>>,
    ) {
        self.names.push(name.to_owned());
        self.crons.push(cron.to_owned());
        self.zones.push(zone.to_owned());
        self.enabled.push(enabled);
        self.next.push(next);
    }

    fn bind<'q>(
        &'q self,
        q: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        q.bind(&self.names)
            .bind(&self.crons)
            .bind(&self.zones)
            .bind(&self.enabled)
            .bind(&self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn redacts_userinfo_password_even_with_a_colon_in_it() {
        assert_eq!(
            redact_url("postgres://app:s3cr:et@db.example:5432/x?sslmode=disable"),
            "postgres://app:***@db.example:5432/x?sslmode=disable"
        );
    }

    #[test]
    fn redacts_query_password() {
        assert_eq!(
            redact_url("postgres://app@h/x?password=hunter2&sslmode=disable"),
            "postgres://app@h/x?password=***&sslmode=disable"
        );
    }

    #[test]
    fn leaves_passwordless_urls_alone() {
        let url = "postgres://postgres@127.0.0.1:5432/test";
        assert_eq!(redact_url(url), url);
    }
}
