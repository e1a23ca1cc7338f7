//! `db`: two nodes; the database goes away in four ways:
//!
//! - (a) stopped 0.5 s into an `f.finish` run and started 6 s later (longer than the 3 s lock
//!   lifetime): the run's outcome is written while the database is down;
//! - (b) stopped right at a tick boundary (x.000 s) for 1.5 s, while nodes claim;
//! - (c) the scheduler's connections killed with `pg_terminate_backend`, several times;
//! - (d) restarted during an `f.slow` run;
//! - (e) the scheduler's server processes frozen (SIGSTOP) for 3-6 s twice, then for 14-16 s
//!   (past the operation timeout: the nodes give up on those connections and open others): the
//!   connections stay up and nothing answers on them (as behind a partition that keeps TCP up).

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::harness::{
    Entry, Options, Outcome, Result, Scenario, freeze_backends, terminate_backends, tick_names,
};
use crate::record::{Ev, Record};
use crate::timeline::now_ms;

/// How the runs of one (task, tick) went, from the records.
fn fate(sc: &Scenario, task: &str, tick: DateTime<Utc>) -> String {
    let rs: Vec<&Record> = sc
        .tail
        .records()
        .iter()
        .filter(|r| r.task == task && r.tick == tick)
        .collect();
    let starts = rs.iter().filter(|r| r.ev == Ev::Start).count();
    let ok = rs
        .iter()
        .filter(|r| r.ev == Ev::End && r.ok == Some(true))
        .count();
    let cancelled = rs
        .iter()
        .filter(|r| r.ev == Ev::End && r.cancelled == Some(true))
        .count();
    format!(
        "{task}@{}: {starts} starts, {ok} successful ends, {cancelled} cancelled ends",
        tick.format("%H:%M:%S")
    )
}

async fn next_start(sc: &mut Scenario, task: &str) -> Result<Record> {
    let since = now_ms() - 100;
    sc.wait_record(Duration::from_secs(30), |r| {
        r.ev == Ev::Start && r.task == task && r.t_ms >= since
    })
    .await
    .ok_or_else(|| format!("no {task} run started within 30 s").into())
}

pub(super) async fn run(opts: &Options) -> Result<Outcome> {
    let mut sc = Scenario::new("db", opts).await?;
    let names = tick_names(10);
    let mut entries: Vec<Entry<'_>> = names.iter().map(|n| (n.as_str(), "* * * * * *")).collect();
    entries.push(("f.finish", "*/2 * * * * *"));
    entries.push(("f.slow", "*/10 * * * * *"));
    sc.write_config(&entries)?;
    for id in ["a", "b"] {
        sc.add_file_node(id, None);
    }
    sc.start_all()?;
    sc.idle(Duration::from_secs(8)).await;

    // (a) Outage during the outcome write.
    let run = next_start(&mut sc, "f.finish").await?;
    let into = run.t_ms + 500 - now_ms();
    sc.idle(Duration::from_millis(into.max(0) as u64)).await;
    let t0 = now_ms();
    sc.cluster()?.stop().await?;
    sc.idle(Duration::from_millis((t0 + 6_000 - now_ms()).max(0) as u64))
        .await;
    sc.cluster()?.start_again().await?;
    let t1 = now_ms();
    sc.fault("(a) database stopped 0.5 s into f.finish for 6 s", t0, t1);
    sc.note(format!(
        "(a) stopped PostgreSQL {} ms into f.finish run {} on {}, started again {:.1} s later",
        t0 - run.t_ms,
        run.run_id,
        run.node,
        (t1 - t0) as f64 / 1000.0
    ));
    sc.idle(Duration::from_secs(12)).await;
    let a = fate(&sc, "f.finish", run.tick);
    sc.notes.push(format!("(a) the interrupted tick: {a}"));

    // (b) Outage at a tick boundary, while nodes claim.
    let mut boundary = (now_ms() / 1000 + 1) * 1000;
    if boundary - now_ms() < 300 {
        boundary += 1000;
    }
    sc.idle(Duration::from_millis((boundary - now_ms()).max(0) as u64))
        .await;
    let t0 = now_ms();
    sc.cluster()?.stop().await?;
    let stopped = now_ms();
    sc.idle(Duration::from_millis((t0 + 1_500 - now_ms()).max(0) as u64))
        .await;
    sc.cluster()?.start_again().await?;
    let t1 = now_ms();
    sc.fault("(b) database stopped at a tick boundary for 1.5 s", t0, t1);
    sc.note(format!(
        "(b) stop issued {} ms after the boundary, down after {} ms, back after {:.1} s",
        t0 - boundary,
        stopped - t0,
        (t1 - t0) as f64 / 1000.0
    ));
    sc.idle(Duration::from_secs(10)).await;

    // (c) Connections killed.
    let mut killed = Vec::new();
    for _ in 0..4 {
        let t = now_ms();
        let (n, rule) = terminate_backends(&sc).await?;
        sc.fault(format!("(c) {n} backends terminated ({rule})"), t, now_ms());
        killed.push(format!("{n} ({rule})"));
        let pause = Duration::from_millis(sc.rng.range(2_000, 4_001));
        sc.idle(pause).await;
    }
    sc.note(format!(
        "(c) terminated the scheduler's backends 4 times: {}",
        killed.join(", ")
    ));
    sc.idle(Duration::from_secs(10)).await;

    // (d) Restart during a long run.
    let run = next_start(&mut sc, "f.slow").await?;
    sc.idle(Duration::from_secs(2)).await;
    let t0 = now_ms();
    sc.cluster()?.restart().await?;
    let t1 = now_ms();
    sc.fault("(d) database restarted during f.slow", t0, t1);
    sc.note(format!(
        "(d) restarted PostgreSQL {:.1} s into f.slow run {} on {} (took {:.1} s)",
        (t0 - run.t_ms) as f64 / 1000.0,
        run.run_id,
        run.node,
        (t1 - t0) as f64 / 1000.0
    ));
    sc.idle(Duration::from_secs(14)).await;
    let d = fate(&sc, "f.slow", run.tick);
    sc.notes.push(format!("(d) the interrupted tick: {d}"));

    // (e) Server processes frozen.
    let mut frozen = Vec::new();
    for (from, to) in [(3_000, 6_001), (3_000, 6_001), (14_000, 16_001)] {
        let span = Duration::from_millis(sc.rng.range(from, to));
        let t = now_ms();
        let n = freeze_backends(&mut sc, span).await?;
        sc.fault(format!("(e) {n} backends frozen for {span:?}"), t, now_ms());
        frozen.push(format!("{n} for {:.1} s", span.as_secs_f64()));
        let pause = Duration::from_millis(sc.rng.range(3_000, 5_001));
        sc.idle(pause).await;
    }
    sc.note(format!(
        "(e) froze the scheduler's backends 3 times: {}",
        frozen.join(", ")
    ));
    sc.idle(Duration::from_secs(10)).await;
    sc.finish().await
}
