//! The store's operations listed once, for the code that only forwards them: each backend's
//! implementations of [`Store`](super::Store) and its role traits ([`store_fns!`]: one function
//! per operation) and [`StoreLayer`](super::StoreLayer) (`layer.rs`: a default per operation,
//! and the blanket implementations). Nothing else forwards the traits by hand.
//!
//! The list is checked against the traits by the compiler: an operation missing here leaves an
//! implementation incomplete, one in the wrong group or with a signature that differs does not
//! match its trait's.
//!
//! An operation given nothing to do says so once, here: `, unless <condition on its
//! arguments>` after its output. When the condition holds, every backend answers the output's
//! default (no rows, no change) without a round trip; a backend's function is called only with
//! something to do.

/// Calls `$then! { { $($state)* } Store { name(arg: Type, ...) -> Output; ... } Role { ... } ...
/// }` with every operation of [`Store`](super::Store) but the two that are not `async`
/// ([`describe`](super::Store::describe) and [`database_server`](super::Store::database_server)),
/// in groups: first `Store`'s own, then one group per role trait, named by the trait, each in
/// the trait's order, each with its `, unless <condition>` if it has one (see the module docs).
/// Types are named as `crate::store` exports them, and `Duration`, `DateTime` and `Utc` as std
/// and chrono do: the expansion site imports them.
macro_rules! store_methods {
    ($then:ident! { $($state:tt)* }) => {
        $then! {
            { $($state)* }
            // The store itself.
            Store {
                migrate() -> StoreResult<()>;
                replication() -> StoreResult<Option<Replication>>;
                listener() -> StoreResult<Box<dyn ChangeListener>>;
                notify() -> StoreResult<()>;
            }
            // Nodes.
            NodeStore {
                register_node(node: &NodeInfo) -> StoreResult<()>;
                heartbeat(node_id: &str, silent_after: Duration) -> StoreResult<Heartbeat>;
                deregister_node(node_id: &str) -> StoreResult<()>;
                report_services(node_id: &str, down: &[String]) -> StoreResult<()>;
                report_database_server(node_id: &str, server: Option<&str>) -> StoreResult<()>;
                nodes() -> StoreResult<Vec<NodeRecord>>;
            }
            // Claiming and running, and upkeep.
            ClaimStore {
                next_wake(node_id: &str, tasks: &[String]) -> StoreResult<WakeInfo>;
                claim(
                    request: ClaimRequest<'_>,
                    rules: &dyn ClaimRules
                ) -> StoreResult<ClaimOutcome>;
                renew_locks(
                    node_id: &str,
                    held: &[(LockKey, Duration)]
                ) -> StoreResult<Renewal>, unless held.is_empty();
                cancel_requests(run_ids: &[i64]) -> StoreResult<Vec<Cancellation>>,
                    unless run_ids.is_empty();
                finish_runs(finishes: &[RunFinish]) -> StoreResult<Vec<FinishResult>>,
                    unless finishes.is_empty();
                record_skips(skips: &[SkipRecord]) -> StoreResult<()>, unless skips.is_empty();
                append_run_logs(chunks: &[LogChunk]) -> StoreResult<()>, unless chunks.is_empty();
                reschedule(next_runs: &[Reschedule]) -> StoreResult<Vec<String>>,
                    unless next_runs.is_empty();
                overdue_tasks(late_by: Duration, limit: u32) -> StoreResult<Vec<OverdueTask>>;
                open_missed(incidents: &[(String, DateTime<Utc>)]) -> StoreResult<Vec<String>>,
                    unless incidents.is_empty();
                prune_history(retention: Duration, batch: u32) -> StoreResult<u64>;
            }
            // Reads of history.
            HistoryStore {
                task_states(task: Option<&str>) -> StoreResult<Vec<TaskState>>;
                task_states_named(tasks: &[String]) -> StoreResult<Vec<TaskState>>,
                    unless tasks.is_empty();
                audit_log(limit: u32, before_id: Option<i64>) -> StoreResult<Vec<AuditEntry>>;
                runs(query: &RunQuery) -> StoreResult<Vec<RunRecord>>;
                run(run_id: i64) -> StoreResult<Option<RunRecord>>;
                recent_runs(task_name: Option<&str>, limit: i64) -> StoreResult<Vec<RunRecord>>;
                latest_runs_per_task(
                    tasks: &[String],
                    per_task: u32,
                    since: DateTime<Utc>
                ) -> StoreResult<Vec<RunRecord>>;
                skips(task_name: &str, since: DateTime<Utc>) -> StoreResult<Vec<SkipRecord>>;
                skips_since(since: DateTime<Utc>, limit: u32) -> StoreResult<Vec<SkipRecord>>;
                latest_skips_per_task(
                    tasks: &[String],
                    per_task: u32,
                    since: DateTime<Utc>
                ) -> StoreResult<Vec<SkipRecord>>;
                run_log(run_id: i64) -> StoreResult<Vec<LogChunk>>;
                succeeded_ticks(
                    task_name: &str,
                    from: DateTime<Utc>,
                    to: DateTime<Utc>
                ) -> StoreResult<Vec<DateTime<Utc>>>;
                backfills(task_name: Option<&str>, limit: u32) -> StoreResult<Vec<BackfillRecord>>;
                backfill(id: i64) -> StoreResult<Option<(BackfillRecord, Vec<BackfillTick>)>>;
                instance_states(query: &InstanceQuery) -> StoreResult<Vec<InstanceState>>;
                instance_summaries(task: Option<&str>) -> StoreResult<Vec<InstanceSummary>>;
                latest_runs_per_instance(
                    task: &str,
                    keys: &[String],
                    per_key: u32
                ) -> StoreResult<Vec<RunRecord>>, unless keys.is_empty();
                limits() -> StoreResult<Vec<LimitState>>;
            }
            // Config.
            ConfigStore {
                load_tasks() -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)>;
                config_state() -> StoreResult<Option<ConfigState>>;
                apply_config(planner: &ConfigPlanner<'_>) -> StoreResult<ConfigPlan>;
                save_limits(limits: &[(String, u32)]) -> StoreResult<Vec<String>>,
                    unless limits.is_empty();
            }
            // Operator actions.
            OperatorStore {
                request_run(
                    task: &str,
                    by: &str,
                    args: Option<&str>,
                    audit: &AuditEntry
                ) -> StoreResult<RunRequest>;
                pause_task(task: &str, pause: &Pause, audit: &AuditEntry) -> StoreResult<bool>;
                resume_task(
                    task: &str,
                    audit: &AuditEntry,
                    planner: &ResumePlanner<'_>
                ) -> StoreResult<Option<Pause>>;
                cancel_run(run_id: i64, by: &str, audit: &AuditEntry) -> StoreResult<CancelRequest>;
                create_backfill(
                    backfill: &NewBackfill,
                    audit: &AuditEntry
                ) -> StoreResult<BackfillCreate>;
                cancel_backfill(
                    id: i64,
                    by: &str,
                    audit: &AuditEntry
                ) -> StoreResult<BackfillCancel>;
                snooze_task(snooze: &Snooze, audit: &AuditEntry) -> StoreResult<bool>;
                unsnooze_task(task: &str, audit: &AuditEntry) -> StoreResult<Option<Snooze>>;
                snoozes() -> StoreResult<Vec<Snooze>>;
                upsert_instance(
                    instance: &InstanceWrite,
                    audit: &AuditEntry,
                    planner: &InstancePlanner<'_>
                ) -> StoreResult<InstanceUpsert>;
                upsert_instances(
                    batch: &[(InstanceWrite, AuditEntry)],
                    planner: &InstanceBatchPlanner<'_>
                ) -> StoreResult<Vec<InstanceUpsert>>, unless batch.is_empty();
                instance(task: &str, key: &str) -> StoreResult<Option<InstanceRecord>>;
                instances_named(
                    instances: &[(String, String)]
                ) -> StoreResult<Vec<InstanceRecord>>, unless instances.is_empty();
                instances(task: &str) -> StoreResult<Vec<InstanceRecord>>;
                remove_instance(task: &str, key: &str, audit: &AuditEntry) -> StoreResult<bool>;
            }
            // Webhook outbox.
            OutboxStore {
                enqueue_events(events: &[NewEvent]) -> StoreResult<()>, unless events.is_empty();
                trim_outbox(keep: u32, reason: &str) -> StoreResult<u64>;
                claim_outbox(
                    node_id: &str,
                    channels: &[String],
                    limit: u32,
                    lease: Duration
                ) -> StoreResult<Vec<OutboxRow>>;
                record_deliveries(deliveries: &[Delivery]) -> StoreResult<()>,
                    unless deliveries.is_empty();
                deliveries(limit: u32) -> StoreResult<Vec<DeliveryRecord>>;
                webhook_disabled(url_digest: &str) -> StoreResult<Option<String>>;
                disable_webhook(url_digest: &str, reason: &str) -> StoreResult<()>;
            }
            // Incidents.
            IncidentStore {
                fold_alerts(folds: &[AlertFold], rule: &IncidentRule) -> StoreResult<Vec<Folded>>,
                    unless folds.is_empty();
                close_incidents(closes: &[IncidentClose]) -> StoreResult<Vec<IncidentRecord>>,
                    unless closes.iter().all(|c| c.kinds.is_empty());
                claim_reminders(limit: u32) -> StoreResult<Vec<IncidentRecord>>;
                mark_alerts(marks: &[AlertMark]) -> StoreResult<Vec<AlertMark>>, unless marks.is_empty();
                incidents(query: &IncidentQuery) -> StoreResult<Vec<IncidentRecord>>;
            }
        }
    };
}

/// Implements [`Store`](super::Store) and each of its role traits for `$store` by calling, for
/// each operation, the function of the same name in the invoking module: `async fn
/// claim(store: &$store, request, rules)`, and `fn describe(store: &$store) -> String` and `fn
/// database_server(store: &$store) -> Option<DatabaseServer>`. A backend writes its operations
/// as such functions, one module per concept, and invokes this once.
#[cfg_attr(
    not(any(feature = "postgres", feature = "sqlite")),
    allow(unused_macros)
)]
macro_rules! store_fns {
    (
        { @impl $store:ty }
        Store { $($own:ident($($own_arg:ident: $own_ty:ty),* $(,)?) -> $own_out:ty;)* }
        $($role:ident {
            $($name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty $(, unless $nothing:expr)?;)*
        })*
    ) => {
        const _: () = {
            use ::chrono::{DateTime, Utc};
            use ::std::time::Duration;
            use $crate::store::*;

            #[::async_trait::async_trait]
            impl Store for $store {
                fn describe(&self) -> String {
                    self::describe(self)
                }

                fn database_server(&self) -> Option<DatabaseServer> {
                    self::database_server(self)
                }

                $(
                    async fn $own(&self, $($own_arg: $own_ty),*) -> $own_out {
                        self::$own(self, $($own_arg),*).await
                    }
                )*
            }

            $(
                #[::async_trait::async_trait]
                impl $role for $store {
                    $(
                        async fn $name(&self, $($arg: $ty),*) -> $out {
                            $(
                                if $nothing {
                                    return Ok(Default::default());
                                }
                            )?
                            self::$name(self, $($arg),*).await
                        }
                    )*
                }
            )*
        };
    };
    ($store:ty) => {
        store_methods!(store_fns! { @impl $store });
    };
}
