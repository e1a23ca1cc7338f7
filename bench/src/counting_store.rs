//! A [`Store`] that counts the calls made to the store it wraps, by method: the one measure of
//! database work that means the same on PostgreSQL and SQLite (each call is one transaction or
//! one read on either backend). PostgreSQL's statements are also counted by the server
//! (`pg_stat_statements`); SQLite has no such counter.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use scheduler::store::*;

/// Calls by method name since the last [`Calls::reset`].
#[derive(Default)]
pub struct Calls(Mutex<BTreeMap<&'static str, u64>>);

impl Calls {
    fn add(&self, method: &'static str) {
        *self.0.lock().unwrap().entry(method).or_default() += 1;
    }
    /// The counts so far, by method.
    pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        self.0.lock().unwrap().clone()
    }
    /// Sum over all methods.
    pub fn total(&self) -> u64 {
        self.0.lock().unwrap().values().sum()
    }
    /// Starts counting from zero.
    pub fn reset(&self) {
        self.0.lock().unwrap().clear();
    }
}

/// Wraps a store; every call is counted in its [`Calls`], then forwarded.
pub struct CountingStore {
    inner: Arc<dyn Store>,
    calls: Arc<Calls>,
}

impl CountingStore {
    /// `inner`, counted; keep the returned counter to read it.
    pub fn wrap(inner: Arc<dyn Store>) -> (Arc<dyn Store>, Arc<Calls>) {
        let calls = Arc::new(Calls::default());
        let store = CountingStore {
            inner,
            calls: Arc::clone(&calls),
        };
        (Arc::new(store), calls)
    }
}

#[async_trait]
impl Store for CountingStore {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    async fn migrate(&self) -> StoreResult<()> {
        self.calls.add("migrate");
        self.inner.migrate().await
    }
    async fn register_node(&self, node: &NodeInfo) -> StoreResult<()> {
        self.calls.add("register_node");
        self.inner.register_node(node).await
    }
    async fn heartbeat(&self, node_id: &str, silent_after: Duration) -> StoreResult<Heartbeat> {
        self.calls.add("heartbeat");
        self.inner.heartbeat(node_id, silent_after).await
    }
    async fn deregister_node(&self, node_id: &str) -> StoreResult<()> {
        self.calls.add("deregister_node");
        self.inner.deregister_node(node_id).await
    }
    async fn nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        self.calls.add("nodes");
        self.inner.nodes().await
    }
    async fn next_wake(&self, tasks: &[String]) -> StoreResult<WakeInfo> {
        self.calls.add("next_wake");
        self.inner.next_wake(tasks).await
    }
    async fn claim(
        &self,
        request: ClaimRequest<'_>,
        policy: &dyn ClaimPolicy,
    ) -> StoreResult<ClaimOutcome> {
        self.calls.add("claim");
        self.inner.claim(request, policy).await
    }
    async fn renew_locks(
        &self,
        node_id: &str,
        held: &[(LockKey, Duration)],
    ) -> StoreResult<Vec<LockKey>> {
        self.calls.add("renew_locks");
        self.inner.renew_locks(node_id, held).await
    }
    async fn finish_runs(&self, finishes: &[RunFinish]) -> StoreResult<Vec<FinishResult>> {
        self.calls.add("finish_runs");
        self.inner.finish_runs(finishes).await
    }
    async fn reschedule(&self, next_runs: &[(String, DateTime<Utc>)]) -> StoreResult<Vec<String>> {
        self.calls.add("reschedule");
        self.inner.reschedule(next_runs).await
    }
    async fn record_skips(&self, skips: &[SkipRecord]) -> StoreResult<()> {
        self.calls.add("record_skips");
        self.inner.record_skips(skips).await
    }
    async fn request_run(
        &self,
        task: &str,
        by: &str,
        audit: &AuditEntry,
    ) -> StoreResult<RunRequest> {
        self.calls.add("request_run");
        self.inner.request_run(task, by, audit).await
    }
    async fn overdue_tasks(&self, late_by: Duration, limit: u32) -> StoreResult<Vec<OverdueTask>> {
        self.calls.add("overdue_tasks");
        self.inner.overdue_tasks(late_by, limit).await
    }
    async fn open_missed(&self, incidents: &[(String, DateTime<Utc>)]) -> StoreResult<Vec<String>> {
        self.calls.add("open_missed");
        self.inner.open_missed(incidents).await
    }
    async fn pause_task(&self, task: &str, pause: &Pause, audit: &AuditEntry) -> StoreResult<bool> {
        self.calls.add("pause_task");
        self.inner.pause_task(task, pause, audit).await
    }
    async fn resume_task(
        &self,
        task: &str,
        audit: &AuditEntry,
        planner: &ResumePlanner<'_>,
    ) -> StoreResult<Option<Pause>> {
        self.calls.add("resume_task");
        self.inner.resume_task(task, audit, planner).await
    }
    async fn audit_log(&self, limit: u32, before_id: Option<i64>) -> StoreResult<Vec<AuditEntry>> {
        self.calls.add("audit_log");
        self.inner.audit_log(limit, before_id).await
    }
    async fn runs(&self, query: &RunQuery) -> StoreResult<Vec<RunRecord>> {
        self.calls.add("runs");
        self.inner.runs(query).await
    }
    async fn run(&self, run_id: i64) -> StoreResult<Option<RunRecord>> {
        self.calls.add("run");
        self.inner.run(run_id).await
    }
    async fn recent_runs(
        &self,
        task_name: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<RunRecord>> {
        self.calls.add("recent_runs");
        self.inner.recent_runs(task_name, limit).await
    }
    async fn skips(&self, task_name: &str, since: DateTime<Utc>) -> StoreResult<Vec<SkipRecord>> {
        self.calls.add("skips");
        self.inner.skips(task_name, since).await
    }
    async fn latest_runs_per_task(
        &self,
        tasks: &[String],
        per_task: u32,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<RunRecord>> {
        self.calls.add("latest_runs_per_task");
        self.inner
            .latest_runs_per_task(tasks, per_task, since)
            .await
    }
    async fn skips_since(&self, since: DateTime<Utc>, limit: u32) -> StoreResult<Vec<SkipRecord>> {
        self.calls.add("skips_since");
        self.inner.skips_since(since, limit).await
    }
    async fn append_run_logs(&self, chunks: &[LogChunk]) -> StoreResult<()> {
        self.calls.add("append_run_logs");
        self.inner.append_run_logs(chunks).await
    }
    async fn run_log(&self, run_id: i64) -> StoreResult<Vec<LogChunk>> {
        self.calls.add("run_log");
        self.inner.run_log(run_id).await
    }
    async fn prune_history(&self, retention: Duration, batch: u32) -> StoreResult<u64> {
        self.calls.add("prune_history");
        self.inner.prune_history(retention, batch).await
    }
    async fn load_tasks(&self) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)> {
        self.calls.add("load_tasks");
        self.inner.load_tasks().await
    }
    async fn task_states(&self, task: Option<&str>) -> StoreResult<Vec<TaskState>> {
        self.calls.add("task_states");
        self.inner.task_states(task).await
    }
    async fn config_state(&self) -> StoreResult<Option<ConfigState>> {
        self.calls.add("config_state");
        self.inner.config_state().await
    }
    async fn apply_config(&self, planner: &ConfigPlanner<'_>) -> StoreResult<ConfigPlan> {
        self.calls.add("apply_config");
        self.inner.apply_config(planner).await
    }
    async fn enqueue_events(&self, events: &[NewEvent]) -> StoreResult<()> {
        self.calls.add("enqueue_events");
        self.inner.enqueue_events(events).await
    }
    async fn claim_outbox(
        &self,
        node_id: &str,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<OutboxRow>> {
        self.calls.add("claim_outbox");
        self.inner.claim_outbox(node_id, limit, lease).await
    }
    async fn record_deliveries(&self, deliveries: &[Delivery]) -> StoreResult<()> {
        self.calls.add("record_deliveries");
        self.inner.record_deliveries(deliveries).await
    }
    async fn deliveries(&self, limit: u32) -> StoreResult<Vec<DeliveryRecord>> {
        self.calls.add("deliveries");
        self.inner.deliveries(limit).await
    }
    async fn webhook_disabled(&self, url_digest: &str) -> StoreResult<Option<String>> {
        self.calls.add("webhook_disabled");
        self.inner.webhook_disabled(url_digest).await
    }
    async fn disable_webhook(&self, url_digest: &str, reason: &str) -> StoreResult<()> {
        self.calls.add("disable_webhook");
        self.inner.disable_webhook(url_digest, reason).await
    }
    async fn listener(&self) -> StoreResult<Box<dyn ChangeListener>> {
        self.calls.add("listener");
        self.inner.listener().await
    }
    async fn notify(&self) -> StoreResult<()> {
        self.calls.add("notify");
        self.inner.notify().await
    }
}
