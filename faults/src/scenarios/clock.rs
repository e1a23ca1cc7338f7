//! `clock`: three nodes, one with its wall clock 5 minutes ahead and one 3 minutes behind
//! (libfaketime). The engine must go by the database's clock; the judge corrects the skewed
//! nodes' record times by the known offsets. Alerts too: a task of another binary (no node
//! here registers it) is kept 3 s overdue by the database's clock the whole time, inside its
//! missed-run grace (30 s for every minute), so a missed-run incident opened for it is a false
//! alarm (a node measuring lateness on its own wall clock, 5 minutes ahead, raised one); at the
//! end it is made an hour late, and an incident must then open (the check did run).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::harness::{
    Entry, Options, Outcome, Result, Scenario, Skew, faketime_library, tick_names,
};
use crate::record::Ev;
use sqlx::Connection;

pub(super) async fn run(opts: &Options) -> Result<Outcome> {
    let library = faketime_library()?;
    let mut sc = Scenario::new("clock", opts).await?;
    let names = tick_names(20);
    let mut entries: Vec<Entry<'_>> = names.iter().map(|n| (n.as_str(), "* * * * * *")).collect();
    entries.push(("f.finish", "*/2 * * * * *"));
    entries.push(("f.slow", "*/10 * * * * *"));
    sc.write_config(&entries)?;
    let skew = |faketime: &str, offset_ms| Skew {
        faketime: faketime.to_owned(),
        offset_ms,
        library: library.clone(),
    };
    sc.add_file_node("a", None);
    sc.add_file_node("b-ahead-5m", Some(skew("+5m", 300_000)));
    sc.add_file_node("c-behind-3m", Some(skew("-3m", -180_000)));
    sc.start_all()?;
    let mut conn = sc.connect().await?;
    let until = tokio::time::Instant::now() + Duration::from_secs_f64(opts.minutes * 60.0);
    let mut other = false;
    while tokio::time::Instant::now() < until {
        if !other {
            other = sqlx::query_scalar::<_, Option<String>>(
                "SELECT to_regclass('scheduler_tasks')::text",
            )
            .fetch_one(&mut conn)
            .await?
            .is_some();
        }
        if other {
            sqlx::query(
                "INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at) \
                 VALUES ($1, '* * * * *', 'UTC', true, now() - interval '3 seconds') \
                 ON CONFLICT (name) DO UPDATE SET next_run_at = EXCLUDED.next_run_at",
            )
            .bind(OTHER)
            .execute(&mut conn)
            .await?;
        }
        sc.idle(Duration::from_secs(1)).await;
    }
    let missed_since = || {
        sqlx::query_scalar::<_, Option<chrono::DateTime<chrono::Utc>>>(
            "SELECT missed_since FROM scheduler_tasks WHERE name = $1",
        )
        .bind(OTHER)
    };
    let false_alarm = missed_since().fetch_one(&mut conn).await?;
    // Now really late: an incident must open within a few missed-run checks.
    sqlx::query(
        "UPDATE scheduler_tasks SET next_run_at = now() - interval '1 hour', missed_since = NULL \
         WHERE name = $1",
    )
    .bind(OTHER)
    .execute(&mut conn)
    .await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while missed_since().fetch_one(&mut conn).await?.is_none() {
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "no missed-run incident for {OTHER} an hour late within 60 s: the check did not \
                 run, so false alarms were not tested"
            )
            .into());
        }
        sc.idle(Duration::from_secs(1)).await;
    }
    conn.close().await?;

    // The skew as the records show it: a start's clock reading minus the tick it serves.
    let mut lags: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for r in sc.tail.records().iter().filter(|r| r.ev == Ev::Start) {
        lags.entry(r.node.clone())
            .or_default()
            .push(r.t_ms - r.tick.timestamp_millis());
    }
    let mut measured = Vec::new();
    for (node, mut v) in lags {
        v.sort_unstable();
        let median = v[v.len() / 2];
        let expected = sc.offsets.get(&node).copied().unwrap_or(0);
        measured.push(format!(
            "{node} {:+.1} s (configured {:+.0} s)",
            median as f64 / 1000.0,
            expected as f64 / 1000.0
        ));
        if (median - expected).abs() > 30_000 {
            return Err(format!(
                "libfaketime did not skew node {node}: its records read {median} ms after the tick, {expected} ms expected"
            )
            .into());
        }
    }
    sc.notes.push(format!(
        "median record clock minus tick, per node: {}",
        measured.join(", ")
    ));
    sc.notes.push(format!(
        "{OTHER}, kept 3 s overdue (grace 30 s): {}; made an hour late: incident opened",
        match false_alarm {
            None => "no missed-run incident".to_owned(),
            Some(at) => format!("incident opened at {at}"),
        }
    ));
    let mut outcome = sc.finish().await?;
    if let Some(at) = false_alarm {
        outcome.verdict.false_alarms.push(format!(
            "missed-run incident opened for {OTHER} (missed_since {at}) though it was never \
             more than 3 s late by the database's clock"
        ));
    }
    Ok(outcome)
}

/// A task no node of this scenario registers.
const OTHER: &str = "other.binary";
