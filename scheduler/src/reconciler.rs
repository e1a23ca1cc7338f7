//! The reconciler: syncs the config's desired state into the store's run state.
//!
//! The config (see [`crate::config`]) says which registered tasks run and on what schedule; the
//! store holds the run state. [`Reconciler::reconcile`] computes the difference ([`plan`], a pure
//! function) and writes it in one transaction. The rules, from the original design:
//!
//! | config entry | row | what happens |
//! |---|---|---|
//! | name not registered in this binary | any | refused, logged, nothing created or changed |
//! | invalid cron, zone or calendar (an unknown calendar name, a bad date or window), or the name listed twice | any | refused; the row keeps its last valid schedule and calendar |
//! | valid | none | created (disabled entries too, so the task is visible) |
//! | `enabled: false` | enabled | disabled; the row is kept, never deleted |
//! | `enabled: true` | disabled | enabled; next run computed from now (missed ticks are not replayed) |
//! | changed cron, zone or calendar | exists | updated in place, next run recomputed; lock columns untouched, so a running handler finishes undisturbed and no second run can start |
//! | unchanged | exists | nothing written (an overdue next run is never overwritten) |
//! | unchanged, enabled, but no next run | exists | repaired: next run computed (a rolling deploy left it unscheduled) |
//! | `shards: N` | rows `name[1]`..`name[N-1]` | created (or enabled) beside the task's row; rows past N disabled, kept |
//! | `shards: nodes` (broadcast) | this node's row `name[@node]` | created by this node's reconcile, pinned to it, taking the task's pause; every node's row follows the task's cron, zone, calendar and `enabled`; the task's own row is pinned to no node (never run) |
//! | no longer `shards: nodes` | node rows | disabled, kept; the task's row unpinned |
//! | a named calendar's rules changed | rows of instances made at run time naming it | their rules rewritten, next run recomputed (a calendar the document no longer has: kept, with a warning) |
//!
//! **No tick runs twice because of a reconcile.** A reconcile is planned twice: once on an
//! unlocked read (an unchanged document writes nothing and takes no lock), and again inside the
//! write transaction on rows locked for it, with the statement's clock — so a claim that ran
//! while the reconcile waited (for another node's reconcile, say) is seen. A recomputed next
//! run always lies after the tick most recently claimed (`last_scheduled_at`), never at or
//! before it.
//!
//! A registered task **absent** from the config is not scheduled: its row, if any, is disabled
//! (never deleted) and a warning names it; when that disables an enabled row (its entry left the
//! config while its code is deployed), `task.removed` is raised, once. A row whose task is neither in the config nor
//! registered in this binary is kept and flagged (`orphaned_since`), with a warning.
//!
//! **Rollouts.** Nodes only reconcile when the document *they* see changes (and once at start), so
//! a node still holding an old document does not rewrite what a newer one set. For strict
//! protection give documents a monotonically increasing top-level `version`: the store refuses to
//! apply a version lower than the highest one applied (checked under a row lock, so two nodes
//! cannot interleave), which keeps a lagging node from flipping the database back and forth.

mod planning;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use chrono_tz::Tz;

use crate::config::{ConfigDocument, ValidatedConfig, validate_with};
use crate::schedule::SpecCache;
use crate::store::{ConfigPlan, ConfigSnapshot, ConfigState, SkipRecord, Store};
use crate::{Result, TaskRegistry};
use planning::plan;

/// What one reconcile did, logged as one structured line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReconcileReport {
    /// Rows created.
    pub created: Vec<String>,
    /// Rows enabled.
    pub enabled: Vec<String>,
    /// Rows disabled (by the config, or because the task is absent from it).
    pub disabled: Vec<String>,
    /// Rows whose cron, zone or calendar changed in place.
    pub updated: Vec<String>,
    /// Entries refused, with the reason.
    pub refused: Vec<(String, String)>,
    /// Registered tasks missing from the config (not scheduled).
    pub absent: Vec<String>,
    /// Of those, the rows this reconcile disabled because their entry left the config (each
    /// raises `task.removed` once).
    pub removed: Vec<String>,
    /// Rows known to neither the config nor this binary (kept, flagged).
    pub orphaned: Vec<String>,
    /// Of those, the rows this reconcile flagged (the others were flagged before).
    pub newly_orphaned: Vec<String>,
    /// Enabled rows that had no next run and were given one.
    pub repaired: Vec<String>,
    /// Rows an operator paused: kept paused (a reconcile never ends a pause).
    pub paused: Vec<String>,
    /// Calendars that instances made at run time name and the document cannot give them (it
    /// no longer has them, or their rules cannot be read), with why: those instances keep the
    /// rules they hold (see `docs/instances.md`).
    pub kept_calendars: Vec<(String, String)>,
    /// Ticks of tasks enabled again that were due while they were disabled (recorded).
    pub disabled_ticks: Vec<SkipRecord>,
    /// Whether this reconcile recorded the document (false: nothing to write, or another node
    /// had recorded it). Alerts about the document (refused entries, orphaned tasks) are sent
    /// by the node that recorded it.
    pub recorded: bool,
    /// Entries that matched their row already.
    pub unchanged: usize,
    /// Set when the whole document was refused as older than the applied one.
    pub stale: Option<StaleDocument>,
}

/// A document older than the one already applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleDocument {
    /// This document's version.
    pub version: i64,
    /// The applied version.
    pub current: i64,
}

impl ReconcileReport {
    /// Whether the reconcile wrote anything.
    pub fn changed_anything(&self) -> bool {
        self.stale.is_none()
            && !(self.created.is_empty()
                && self.enabled.is_empty()
                && self.disabled.is_empty()
                && self.updated.is_empty()
                && self.orphaned.is_empty()
                && self.repaired.is_empty())
    }
}

impl fmt::Display for ReconcileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(stale) = self.stale {
            return write!(
                f,
                "config version {} refused: version {} is already applied",
                stale.version, stale.current
            );
        }
        write!(
            f,
            "created {}, enabled {}, disabled {}, updated {}, repaired {}, unchanged {}, refused {}, absent {}, orphaned {}",
            self.created.len(),
            self.enabled.len(),
            self.disabled.len(),
            self.updated.len(),
            self.repaired.len(),
            self.unchanged,
            self.refused.len(),
            self.absent.len(),
            self.orphaned.len()
        )
    }
}

/// A stable digest of the desired state, to record which document was applied.
fn digest(validated: &ValidatedConfig) -> String {
    // FNV-1a: change detection, not security.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes.iter().chain(b"\x1f") {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for d in validated.desired.values() {
        feed(d.name.as_bytes());
        feed(if d.enabled { b"1" } else { b"0" });
        feed(d.schedule.expression().as_bytes());
        feed(d.schedule.timezone().name().as_bytes());
        if d.broadcast {
            feed(b"shards=nodes");
        }
        if d.shards != 1 {
            feed(format!("shards={}", d.shards).as_bytes());
        }
        if let Some(limit) = &d.limit {
            feed(format!("limit={limit}").as_bytes());
        }
    }
    for (name, size) in &validated.limits {
        feed(format!("limits.{name}={size}").as_bytes());
    }
    for problem in &validated.limit_problems {
        feed(b"refused limit");
        feed(problem.as_bytes());
    }
    // Refusals too: a document whose only news is a refused entry is recorded (once), so its
    // `config.refused` alert is sent.
    let refused: BTreeSet<(&str, String)> = validated
        .refused
        .iter()
        .map(|r| (r.name.as_str(), r.reason.to_string()))
        .collect();
    for (name, reason) in refused {
        feed(b"refused");
        feed(name.as_bytes());
        feed(reason.as_bytes());
    }
    format!("{hash:016x}")
}

/// Syncs config documents into the store.
pub struct Reconciler {
    store: Arc<dyn Store>,
    registry: TaskRegistry,
    default_tz: Tz,
    node_id: String,
    specs: SpecCache,
}

impl fmt::Debug for Reconciler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconciler")
            .field("tasks", &self.registry.len())
            .field("default_tz", &self.default_tz)
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

impl Reconciler {
    /// A reconciler for the tasks in `registry`, reading zone-less entries in `default_tz`.
    pub fn new(
        store: Arc<dyn Store>,
        registry: TaskRegistry,
        default_tz: Tz,
        node_id: &str,
    ) -> Self {
        Self {
            store,
            registry,
            default_tz,
            node_id: node_id.to_owned(),
            specs: SpecCache::default(),
        }
    }

    /// Writes the sizes of the document's good limits (before the rows naming them), unless the
    /// document is older than the one applied. Limits it leaves out or refuses keep their size.
    async fn save_limits(&self, doc: &ConfigDocument, validated: &ValidatedConfig) -> Result<()> {
        if validated.limits.is_empty() {
            return Ok(());
        }
        if let Some(version) = doc.version
            && let Some(applied) = self.store.config_state().await?.and_then(|s| s.version)
            && version < applied
        {
            return Ok(()); // refused as stale by the reconcile itself
        }
        let sizes: Vec<(String, u32)> = validated
            .limits
            .iter()
            .map(|(name, size)| (name.clone(), *size))
            .collect();
        let changed = self.store.save_limits(&sizes).await?;
        if !changed.is_empty() {
            tracing::info!(limits = ?changed, "limits shared by tasks written");
        }
        Ok(())
    }

    /// Validates `doc`, writes what differs from the store (nothing when nothing differs), logs
    /// every refusal and one summary line, and returns the report.
    pub async fn reconcile(&self, doc: &ConfigDocument) -> Result<ReconcileReport> {
        let validated = validate_with(doc, &self.registry, self.default_tz, &self.specs);
        for problem in &validated.limit_problems {
            tracing::error!(%problem, "config limit refused; it keeps its last size, and every entry naming it its last valid state");
        }
        self.save_limits(doc, &validated).await?;
        let (db_now, rows) = self.store.load_tasks().await?;
        let (changes, report) = plan(
            doc,
            &validated,
            &self.registry,
            &rows,
            db_now,
            &self.node_id,
        );
        for (name, reason) in &report.refused {
            tracing::error!(task = %name, %reason, "config entry refused; the task keeps its last valid state");
        }
        for name in &report.absent {
            tracing::warn!(task = %name, "task is registered but absent from the config: not scheduled");
        }
        for name in &report.orphaned {
            tracing::warn!(task = %name, "task row is known to neither the config nor this binary: kept, flagged orphaned");
        }
        for (calendar, reason) in &report.kept_calendars {
            tracing::warn!(%calendar, %reason, "instances made at run time name a calendar the document cannot give them: they keep its last rules");
        }
        if changes.is_empty() && report.refused.is_empty() {
            tracing::debug!(%report, "config reconciled: nothing to change");
            return Ok(report);
        }
        // Plan again on the rows as they are inside the write transaction, locked.
        let digest = digest(&validated);
        if changes.is_empty() {
            // Only refusals: the document is recorded once (its alerts sent by one node).
            if report.refused.is_empty()
                || self
                    .store
                    .config_state()
                    .await?
                    .is_some_and(|s| s.digest == digest)
            {
                tracing::debug!(%report, "config reconciled: nothing to change");
                return Ok(report);
            }
        }
        let state = ConfigState::new(doc.version, digest.clone(), self.node_id.clone());
        let final_report = std::sync::Mutex::new(report.clone());
        let refusals = !report.refused.is_empty();
        let planner = |snapshot: &ConfigSnapshot| {
            if let (Some(current), Some(version)) = (
                snapshot.applied.as_ref().and_then(|a| a.version),
                doc.version,
            ) && version < current
            {
                return ConfigPlan::Stale { current };
            }
            let (changes, report) = plan(
                doc,
                &validated,
                &self.registry,
                &snapshot.rows,
                snapshot.db_now,
                &self.node_id,
            );
            let already = snapshot
                .applied
                .as_ref()
                .is_some_and(|a| a.digest == digest);
            let skips = report.disabled_ticks.clone();
            *final_report.lock().unwrap_or_else(|p| p.into_inner()) = report;
            if changes.is_empty() && (already || !refusals) {
                ConfigPlan::Nothing
            } else {
                ConfigPlan::Apply {
                    changes,
                    state: state.clone(),
                    skips,
                }
            }
        };
        let outcome = self.store.apply_config(&planner).await?;
        let mut report = final_report.into_inner().unwrap_or_else(|p| p.into_inner());
        match outcome {
            ConfigPlan::Stale { current } => {
                let version = doc.version.unwrap_or_default();
                report.stale = Some(StaleDocument { version, current });
                report.newly_orphaned.clear();
                report.removed.clear();
                report.disabled_ticks.clear();
                tracing::warn!(version, current, "{report}");
            }
            ConfigPlan::Nothing => {
                report.newly_orphaned.clear();
                report.removed.clear();
                report.disabled_ticks.clear();
                tracing::debug!(%report, "config reconciled: another node had applied it already");
            }
            _ => {
                report.recorded = true;
                for name in &report.removed {
                    tracing::warn!(task = %name, "task removed from the config while its code is deployed: disabled (not deleted); task.removed raised");
                }
                for name in &report.repaired {
                    tracing::warn!(task = %name, "enabled task had no next run (a node that could not read its schedule cleared it, or the row was edited): scheduled again");
                }
                tracing::info!(
                    created = ?report.created,
                    enabled = ?report.enabled,
                    disabled = ?report.disabled,
                    updated = ?report.updated,
                    repaired = ?report.repaired,
                    refused = report.refused.len(),
                    unchanged = report.unchanged,
                    version = doc.version,
                    "config reconciled: {report}"
                );
            }
        }
        Ok(report)
    }
}
