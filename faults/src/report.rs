//! The Markdown report: one table row per scenario, then what each one found in detail.

use std::fmt::Write;

use crate::harness::Outcome;
use crate::judge::TaskTick;

/// A scenario's result: judged, or the harness itself failed.
#[derive(Debug)]
pub enum Row {
    /// The scenario ran and was judged.
    Judged(Box<Outcome>),
    /// The harness could not run it.
    HarnessError {
        /// Scenario name.
        name: String,
        /// Seed.
        seed: u64,
        /// What went wrong.
        error: String,
    },
}

impl Row {
    /// Whether the row is a failure (violations, or a harness error).
    pub fn failed(&self) -> bool {
        match self {
            Row::Judged(o) => o.verdict.violations() > 0,
            Row::HarnessError { .. } => true,
        }
    }
}

fn secs(ms: i64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn ticks(list: &[TaskTick], n: usize) -> String {
    let mut out: Vec<String> = list
        .iter()
        .take(n)
        .map(|(t, at)| format!("{t}@{}", at.format("%H:%M:%S%.3f")))
        .collect();
    if list.len() > n {
        out.push(format!("... ({} more)", list.len() - n));
    }
    out.join(", ")
}

/// Renders the whole report.
pub fn render(rows: &[Row], command: &str, master_seed: u64) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Fault-injection report\n");
    let _ = writeln!(
        s,
        "`{command}` — master seed {master_seed} (rerun with `--seed {master_seed}`), finished {}.\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M:%S UTC")
    );
    let _ = writeln!(
        s,
        "Invariant columns must be 0. Takeover: from a SIGKILL/SIGSTOP to the next start of a task whose run was in flight on the victim (documented bound: lock lifetime 3 s + poll interval 1 s).\n"
    );
    let _ = writeln!(
        s,
        "| scenario | seed | length | runs started | finished twice | started again after success | overlapping runs | unaccounted ticks (of expected) | worst takeover | node exits | result |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        match row {
            Row::HarnessError { name, seed, error } => {
                let _ = writeln!(
                    s,
                    "| {name} | {seed} | — | — | — | — | — | — | — | — | **harness error**: {} |",
                    error.replace('|', "\\|").replace('\n', " ")
                );
            }
            Row::Judged(o) => {
                let v = &o.verdict;
                let takeover = match &v.takeover {
                    None => "—".to_owned(),
                    Some(t) => match t.worst_ms {
                        Some(w) => format!(
                            "{} (median {}, {} runs{})",
                            secs(w),
                            secs(t.median_ms.unwrap_or(w)),
                            t.in_flight,
                            if t.never > 0 {
                                format!(", {} never", t.never)
                            } else {
                                String::new()
                            }
                        ),
                        None => "no run in flight".to_owned(),
                    },
                };
                let exits = if v.bad_exits.is_empty() {
                    "0".to_owned()
                } else {
                    format!("**{}**: {}", v.bad_exits.len(), v.bad_exits.join("; "))
                };
                let n = |k: usize| {
                    if k == 0 {
                        "0".to_owned()
                    } else {
                        format!("**{k}**")
                    }
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.0} s | {} | {} | {} | {} | {} ({}) | {} | {} | {} |",
                    o.name,
                    o.seed,
                    o.secs,
                    v.starts,
                    n(v.finished_twice.len()),
                    n(v.started_after_success.len()),
                    n(v.overlaps.len()),
                    n(v.unaccounted.len()),
                    v.expected_ticks,
                    takeover,
                    exits,
                    if v.violations() == 0 {
                        "ok".to_owned()
                    } else {
                        format!("**{} violations**", v.violations())
                    },
                );
            }
        }
    }
    for row in rows {
        let Row::Judged(o) = row else { continue };
        let v = &o.verdict;
        let _ = writeln!(s, "\n## {}\n", o.name);
        let _ = writeln!(
            s,
            "Files: `{}` (records/, logs/, timeline.json).\n",
            o.dir.display()
        );
        let statuses: Vec<String> = o
            .run_statuses
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(
            s,
            "- runs in `scheduler_runs`: {}; start records {}, successful ends {}",
            if statuses.is_empty() {
                "none".to_owned()
            } else {
                statuses.join(", ")
            },
            v.starts,
            v.successes
        );
        let _ = writeln!(
            s,
            "- expected ticks {} (of which {} accounted only by `ticks_collapsed` or a skip row); worst start lag {}",
            v.expected_ticks,
            v.collapsed_or_skipped,
            v.worst_start_lag_ms
                .map_or("—".to_owned(), |ms| format!("{ms} ms"))
        );
        if !v.off_schedule.is_empty() {
            let _ = writeln!(
                s,
                "- **starts off the configured schedule** (reported, not counted): {}",
                ticks(&v.off_schedule, 8)
            );
        }
        for note in &o.notes {
            let _ = writeln!(s, "- {note}");
        }
        if !v.unknown_outcome_reruns.is_empty() {
            let _ = writeln!(
                s,
                "- run again after a success that died with its SIGKILLed node before its outcome was recorded (recorded `lost`; `recovery = \"rerun\"` is at least once for unknown outcomes; reported, not counted): {}",
                ticks(&v.unknown_outcome_reruns, 8)
            );
        }
        if !v.finished_twice.is_empty() {
            let _ = writeln!(s, "- **finished twice**: {}", ticks(&v.finished_twice, 8));
        }
        if !v.started_after_success.is_empty() {
            let _ = writeln!(
                s,
                "- **started again after a successful end**: {}",
                ticks(&v.started_after_success, 8)
            );
        }
        if !v.overlaps.is_empty() {
            let list: Vec<String> = v
                .overlaps
                .iter()
                .take(6)
                .map(|o| {
                    format!(
                        "{} run {} ({} pid {}, tick {}) and run {} ({} pid {}, tick {}) alive together {} ms, the first writing {} records after the second started",
                        o.task,
                        o.first.2,
                        o.first.0,
                        o.first.1,
                        o.first.3.format("%H:%M:%S"),
                        o.second.2,
                        o.second.0,
                        o.second.1,
                        o.second.3.format("%H:%M:%S"),
                        o.overlap_ms,
                        o.records_after
                    )
                })
                .collect();
            let more = v.overlaps.len().saturating_sub(6);
            let _ = writeln!(
                s,
                "- **overlapping runs**: {}{}",
                list.join("; "),
                if more > 0 {
                    format!("; ... ({more} more)")
                } else {
                    String::new()
                }
            );
        }
        if !v.unaccounted.is_empty() {
            let _ = writeln!(s, "- **unaccounted ticks**: {}", ticks(&v.unaccounted, 10));
        }
        for e in &v.bad_exits {
            let _ = writeln!(s, "- **node exit**: {e}");
        }
        for e in &v.false_alarms {
            let _ = writeln!(s, "- **false alarm**: {e}");
        }
        for e in &v.ran_after_removal {
            let _ = writeln!(s, "- **ran after its removal**: {e}");
        }
    }
    s
}
