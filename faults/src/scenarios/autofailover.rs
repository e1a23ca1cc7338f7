//! `autofailover` and `autofailover-defaults`: two nodes on a real HA engine, a pg_auto_failover
//! formation on 127.0.0.1 (a monitor, a primary and a synchronous standby), reached through the
//! multi-host URL `pg_autoctl show uri` prints; ten every-second tasks, `f.finish` every 2 s and
//! `f.slow` every 10 s. Two failovers:
//!
//! - (1) planned: `pg_autoctl perform failover`;
//! - (2) a crash: kill -9 of the primary's keeper and server (every process of its
//!   `pg_autoctl run` and of its Postgres), 20-130 ms after a tick; the monitor notices and
//!   promotes the standby.
//!
//! `autofailover` shortens the monitor's health-check timings ([`Timings::shortened`]);
//! `autofailover-defaults` keeps pg_auto_failover's. Measured per failover, from the handlers'
//! own record: the pause (the longest time without any handler starting, from the last start
//! before to the first after), when the tasks were back after the fault and after the monitor
//! had the new primary in place, and what became of the runs in flight.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

use crate::formation::{Event, Timings, describe};
use crate::harness::{Entry, Options, Outcome, Result, Scenario, tick_names};
use crate::judge::Verdict;
use crate::record::{Ev, Record};
use crate::timeline::now_ms;

/// One failover as it happened.
struct Case {
    what: &'static str,
    /// When the harness began it (the command sent, the kill done).
    t0_ms: i64,
    /// When the harness saw the new primary in place.
    t1_ms: i64,
    /// When the new primary reported `wait_primary` (the monitor's clock).
    promoted_ms: Option<i64>,
    from: String,
    to: String,
}

/// The longest time no handler started, among gaps touching `[from_ms, until_ms]`: (last start
/// before, first start after).
fn pause(records: &[Record], from_ms: i64, until_ms: i64) -> Option<(i64, i64)> {
    let mut starts: Vec<i64> = records
        .iter()
        .filter(|r| r.ev == Ev::Start)
        .map(|r| r.t_ms)
        .collect();
    starts.sort_unstable();
    starts
        .windows(2)
        .filter(|w| w[1] >= from_ms && w[0] <= until_ms)
        .map(|w| (w[0], w[1]))
        .max_by_key(|(a, b)| b - a)
}

/// What became of the runs in flight at `t_ms` (started, not ended), by their records: the quick
/// ones counted by outcome, the long ones (`f.slow`, `f.finish`) one by one.
fn in_flight_fates(records: &[Record], t_ms: i64) -> String {
    let mut quick: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut long = Vec::new();
    for s in records
        .iter()
        .filter(|r| r.ev == Ev::Start && r.t_ms <= t_ms)
    {
        let end = records
            .iter()
            .find(|r| r.ev == Ev::End && r.pid == s.pid && r.run_id == s.run_id);
        if end.is_some_and(|e| e.t_ms <= t_ms) {
            continue;
        }
        let (kind, after) = match end {
            Some(e) if e.ok == Some(true) => ("ended ok", Some(e.t_ms - t_ms)),
            Some(e) if e.cancelled == Some(true) => ("told to stop", Some(e.t_ms - t_ms)),
            Some(e) => ("ended failed", Some(e.t_ms - t_ms)),
            None => ("no end recorded", None),
        };
        if s.task.starts_with("f.tick.") {
            *quick.entry(kind).or_default() += 1;
        } else {
            let when = after.map_or(String::new(), |ms| format!(" {:+.1} s", secs(ms)));
            long.push(format!("{} on {}: {kind}{when}", s.task, s.node));
        }
    }
    let mut out: Vec<String> = quick
        .into_iter()
        .map(|(kind, n)| format!("{n} quick runs {kind}"))
        .collect();
    out.extend(long);
    if out.is_empty() {
        "none".to_owned()
    } else {
        out.join(", ")
    }
}

fn secs(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

fn clock(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.format("%H:%M:%S%.3f").to_string())
        .unwrap_or_default()
}

/// When `node` first reported `wait_primary` (and was assigned it) among `events`.
fn promoted_at(events: &[Event], node: &str) -> Option<DateTime<Utc>> {
    events
        .iter()
        .find(|e| e.node == node && e.reported == "wait_primary" && e.goal == "wait_primary")
        .map(|e| e.at)
}

fn write_events(sc: &Scenario, file: &str, events: &[Event]) -> Result<()> {
    let text: String = events
        .iter()
        .map(|e| {
            format!(
                "{} {} {}/{} {}\n",
                e.at.to_rfc3339_opts(SecondsFormat::Millis, true),
                e.node,
                e.reported,
                e.goal,
                e.description
            )
        })
        .collect();
    std::fs::write(sc.dir.join("formation").join(file), text)?;
    Ok(())
}

/// Waits for the tasks to run, giving up after 60 s.
async fn wait_for_ticks(sc: &mut Scenario, what: &str) -> Result<()> {
    let since = now_ms();
    sc.wait_record(Duration::from_secs(60), |r| {
        r.ev == Ev::Start && r.t_ms >= since
    })
    .await
    .map(drop)
    .ok_or_else(|| format!("no handler started within 60 s {what}").into())
}

pub(super) async fn run(opts: &Options, name: &'static str, timings: Timings) -> Result<Outcome> {
    let mut sc = Scenario::on_formation(name, opts, &timings).await?;
    {
        let f = sc.formation()?;
        let uri = f.uri().to_owned();
        let user = f.user().to_owned();
        sc.notes
            .push(format!("{}; {}", version(), timings.describe()));
        sc.notes.push(format!(
            "the nodes' URL, as `pg_autoctl show uri --formation default` printed it: `{uri}` \
             (with PGUSER={user})"
        ));
    }
    let names = tick_names(10);
    let mut entries: Vec<Entry<'_>> = names.iter().map(|n| (n.as_str(), "* * * * * *")).collect();
    entries.push(("f.finish", "*/2 * * * * *"));
    entries.push(("f.slow", "*/10 * * * * *"));
    sc.write_config(&entries)?;
    for id in ["a", "b"] {
        sc.add_file_node(id, None);
    }
    sc.start_all()?;
    wait_for_ticks(&mut sc, "after the nodes started").await?;
    sc.idle(Duration::from_secs(12)).await;

    let mut cases = Vec::new();

    // (1) Planned failover.
    let (from, to) = roles(&mut sc).await?;
    let t0 = now_ms();
    sc.formation()?.perform_failover().await?;
    let nodes = sc
        .formation()?
        .wait_until("the new primary", Duration::from_secs(60), |n| {
            n.iter().any(|n| n.name == to && n.is_writable())
        })
        .await?;
    let t1 = now_ms();
    sc.fault("(1) pg_autoctl perform failover", t0, t1);
    sc.note(format!(
        "(1) `pg_autoctl perform failover`: {from} -> {to}, returned after {:.1} s ({})",
        secs(t1 - t0),
        describe(&nodes)
    ));
    let events = since(&mut sc, t0).await?;
    write_events(&sc, "events-1-planned.txt", &events)?;
    cases.push(Case {
        what: "(1) planned failover",
        t0_ms: t0,
        t1_ms: t1,
        promoted_ms: promoted_at(&events, &to).map(|t| t.timestamp_millis()),
        from,
        to,
    });
    sc.idle(Duration::from_secs(15)).await;

    // (2) kill -9 of the primary's keeper and server.
    let nodes = sc
        .formation()?
        .wait_healthy(Duration::from_secs(180))
        .await?;
    sc.note(format!("(2) formation healthy again: {}", describe(&nodes)));
    wait_for_ticks(&mut sc, "before the crash").await?;
    sc.idle(Duration::from_secs(5)).await;
    let (from, to) = roles(&mut sc).await?;
    let victim = index_of(&mut sc, &from)?;
    sc.idle_until_just_after_a_tick().await;
    let t0 = now_ms();
    let killed = sc.formation()?.crash(victim);
    let timeout = Duration::from_secs(300);
    let nodes = sc
        .formation()?
        .wait_until("the standby promoted", timeout, |n| {
            n.iter().any(|n| n.name == to && n.is_writable())
        })
        .await?;
    let t1 = now_ms();
    sc.fault("(2) kill -9 of the primary's keeper and server", t0, t1);
    sc.note(format!(
        "(2) kill -9 of {from}'s keeper and server ({killed} processes) at {}: {to} writable \
         after {:.1} s ({})",
        clock(t0),
        secs(t1 - t0),
        describe(&nodes)
    ));
    let events = since(&mut sc, t0).await?;
    write_events(&sc, "events-2-crash.txt", &events)?;
    if let Some(e) = events.iter().find(|e| e.description.contains("unhealthy")) {
        sc.notes.push(format!(
            "(2) the monitor marked {} unhealthy {:.1} s after the kill",
            e.node,
            secs(e.at.timestamp_millis() - t0)
        ));
    }
    cases.push(Case {
        what: "(2) kill -9 of the primary",
        t0_ms: t0,
        t1_ms: t1,
        promoted_ms: promoted_at(&events, &to).map(|t| t.timestamp_millis()),
        from,
        to,
    });
    // The killed node stays down: a formation of one writable node from here on.
    sc.idle(Duration::from_secs(15)).await;
    wait_for_ticks(&mut sc, "after the crash failover").await?;

    let records = sc.tail.records().to_vec();
    let mut outcome = sc.finish().await?;
    for c in &cases {
        let line = measure(&records, c, &outcome.verdict);
        outcome.notes.push(line);
    }
    Ok(outcome)
}

/// The report line of one failover.
fn measure(records: &[Record], c: &Case, verdict: &Verdict) -> String {
    let window = (c.t0_ms - 10_000, c.t1_ms + 30_000);
    let near = |t: &DateTime<Utc>| {
        let ms = t.timestamp_millis();
        ms >= window.0 && ms <= window.1
    };
    let twice = verdict
        .finished_twice
        .iter()
        .filter(|(_, t)| near(t))
        .count();
    let overlaps = verdict
        .overlaps
        .iter()
        .filter(|o| near(&o.first.3) || near(&o.second.3))
        .count();
    let starts = records
        .iter()
        .filter(|r| r.ev == Ev::Start && r.t_ms >= window.0 && r.t_ms <= window.1)
        .count();
    let pause = match pause(records, c.t0_ms, c.t1_ms) {
        Some((before, after)) => {
            let promoted = c.promoted_ms.map_or(String::new(), |p| {
                format!(
                    ", {:.1} s after {} reported wait_primary ({})",
                    secs(after - p),
                    c.to,
                    clock(p)
                )
            });
            format!(
                "pause {:.1} s (last start before {}, first after {}); tasks back {:.1} s after \
                 the fault began{promoted}",
                secs(after - before),
                clock(before),
                clock(after),
                secs(after - c.t0_ms),
            )
        }
        None => "no start around it: pause not measured".to_owned(),
    };
    format!(
        "{} {} -> {}: {pause}; {starts} starts from 10 s before to 30 s after, finished twice \
         {twice}, overlaps {overlaps}; runs in flight at the fault: {}",
        c.what,
        c.from,
        c.to,
        in_flight_fates(records, c.t0_ms)
    )
}

/// (the primary's name, the secondary's name).
async fn roles(sc: &mut Scenario) -> Result<(String, String)> {
    let nodes = sc
        .formation()?
        .wait_healthy(Duration::from_secs(180))
        .await?;
    let p = nodes.iter().find(|n| n.reported == "primary");
    let s = nodes.iter().find(|n| n.reported == "secondary");
    match (p, s) {
        (Some(p), Some(s)) => Ok((p.name.clone(), s.name.clone())),
        _ => Err(format!("no primary and secondary: {}", describe(&nodes)).into()),
    }
}

fn index_of(sc: &mut Scenario, name: &str) -> Result<usize> {
    let f = sc.formation()?;
    (0..2)
        .find(|&i| f.node(i).0 == name)
        .ok_or_else(|| format!("no node {name} in the formation").into())
}

async fn since(sc: &mut Scenario, t0_ms: i64) -> Result<Vec<Event>> {
    let from = Utc
        .timestamp_millis_opt(t0_ms - 1_000)
        .single()
        .ok_or("a time out of range")?;
    sc.formation()?.events_since(from).await
}

/// `pg_autoctl --version`'s first line.
fn version() -> String {
    std::process::Command::new("pg_autoctl")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "pg_autoctl (version unknown)".to_owned())
}
