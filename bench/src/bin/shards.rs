//! A sharded task on many node processes (issue 23): how its shards spread over the nodes, how
//! late each shard's handler starts after the tick, and what a `kill -9` of a node mid-tick
//! does (its shards taken over by the others: how long until they start, none run twice).
//!
//! `scripts/bench shards` (a throwaway cluster). Knobs: `SHARDS_NODES` (10) node processes
//! (`shards_node`) run one task of `SHARDS_COUNT` (100) shards every `SHARDS_EVERY` seconds (30,
//! dividing 60), each shard's handler working `SHARDS_WORK_MS` (2000); `SHARDS_TICKS` (8) ticks
//! are measured after one tick of warm-up. During measured tick `SHARDS_KILL_TICK` (4; 0: no
//! kill), `SHARDS_KILL_AFTER_MS` (500) after the first node's first handler of that tick
//! started, that node is killed with SIGKILL. `SHARDS_LOCK_LIFETIME` (seconds; the engine's
//! default, 20 s, when unset) bounds how long its shards stay locked. `SHARDS_KEEP=1` keeps the
//! handlers' records and the nodes' output (their log with `RUST_LOG` set).
//!
//! Judged by the handlers' own record, never the store's: every handler appends a `start` and
//! an `end` line (tick, shard, node, wall-clock ms, run id) to its node's file, written at once,
//! so the killed node's lines survive it. A shard of a tick that ended twice, or started twice
//! other than once on the killed node then once elsewhere, ran twice; a shard of a measured
//! tick with no `end` did not run.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use scheduler_bench::engine_support::*;
use scheduler_bench::node_procs::{sibling, sleep_until, wait_registered};

const SCHEMA: &str = "bench_shards";

fn node_name(i: usize) -> String {
    format!("n{i:02}")
}

/// One line of a handler's record.
#[derive(Debug, Clone)]
struct Line {
    start: bool,
    tick: i64,
    shard: u32,
    node: String,
    at: i64,
    run: i64,
}

fn read_records(dir: &std::path::Path, nodes: usize) -> Vec<Line> {
    let mut lines = Vec::new();
    for i in 0..nodes {
        let text =
            std::fs::read_to_string(dir.join(format!("{}.txt", node_name(i)))).unwrap_or_default();
        for l in text.lines() {
            let f: Vec<&str> = l.split(' ').collect();
            if f.len() != 6 {
                continue;
            }
            lines.push(Line {
                start: f[0] == "start",
                tick: f[1].parse().unwrap(),
                shard: f[2].parse().unwrap(),
                node: f[3].to_owned(),
                at: f[4].parse().unwrap(),
                run: f[5].parse().unwrap(),
            });
        }
    }
    lines
}

/// Per (tick, shard): its starts and its ends, in order of time.
#[derive(Default)]
struct Shard {
    starts: Vec<Line>,
    ends: Vec<Line>,
}

fn ledger(lines: &[Line]) -> BTreeMap<(i64, u32), Shard> {
    let mut ledger: BTreeMap<(i64, u32), Shard> = BTreeMap::new();
    for l in lines {
        let e = ledger.entry((l.tick, l.shard)).or_default();
        if l.start {
            e.starts.push(l.clone());
        } else {
            e.ends.push(l.clone());
        }
    }
    for e in ledger.values_mut() {
        e.starts.sort_by_key(|l| l.at);
        e.ends.sort_by_key(|l| l.at);
    }
    ledger
}

/// min | p50 | p99 | max of `values`.
fn pcts(values: &[f64]) -> String {
    if values.is_empty() {
        return "- | - | - | -".into();
    }
    let mut v = values.to_vec();
    format!(
        "{:.0} | {:.0} | {:.0} | {:.0}",
        percentile(&mut v, 0.0),
        percentile(&mut v, 50.0),
        percentile(&mut v, 99.0),
        percentile(&mut v, 100.0)
    )
}

/// How many of `lags` (ms) are under the spread grace (`scheduler::testing::shard::SPREAD_GRACE`).
fn within_grace(lags: &[f64]) -> usize {
    let grace = scheduler::testing::shard::SPREAD_GRACE.as_millis() as f64;
    lags.iter().filter(|l| **l < grace).count()
}

#[tokio::main]
async fn main() {
    let nodes = knob("SHARDS_NODES", 10) as usize;
    let shards = knob("SHARDS_COUNT", 100) as u32;
    let every = knob("SHARDS_EVERY", 30) as i64;
    let ticks = knob("SHARDS_TICKS", 8) as i64;
    let work_ms = knob("SHARDS_WORK_MS", 2000) as i64;
    let kill_tick = knob("SHARDS_KILL_TICK", 4) as i64;
    let kill_after = knob("SHARDS_KILL_AFTER_MS", 500) as i64;
    let lifetime = std::env::var("SHARDS_LOCK_LIFETIME").ok();
    assert!(
        (1..=60).contains(&every) && 60 % every == 0,
        "SHARDS_EVERY must divide 60"
    );
    assert!(
        kill_tick < ticks,
        "SHARDS_KILL_TICK must be before the last measured tick"
    );
    assert!(nodes >= 2 || kill_tick == 0, "a kill needs two nodes");
    let url = database_url();
    let admin = fresh_schema(&url, SCHEMA).await;
    let dir = std::env::temp_dir().join(format!("shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = sibling("shards_node");
    let mut procs: Vec<Option<Child>> = (0..nodes)
        .map(|i| {
            let log = std::fs::File::create(dir.join(format!("{}.log", node_name(i)))).unwrap();
            let mut cmd = Command::new(&exe);
            cmd.env("DATABASE_URL", &url)
                .env("SHARDS_SCHEMA", SCHEMA)
                .env("SHARDS_NODE_ID", node_name(i))
                .env("SHARDS_COUNT", shards.to_string())
                .env("SHARDS_CRON", format!("*/{every} * * * * *"))
                .env("SHARDS_WORK_MS", work_ms.to_string())
                .env("SHARDS_RECORD", dir.join(format!("{}.txt", node_name(i))))
                .stdout(log.try_clone().unwrap())
                .stderr(log);
            if let Some(l) = &lifetime {
                cmd.env("SHARDS_LOCK_LIFETIME", l);
            }
            Some(
                cmd.spawn()
                    .expect("start shards_node (build the bench bins)"),
            )
        })
        .collect();
    wait_registered(&admin, SCHEMA, nodes, Duration::from_secs(120)).await;

    // One whole tick of warm-up; the window runs from mid-interval to mid-interval.
    let every_ms = every * 1000;
    let now_ms = Utc::now().timestamp_millis();
    let start_ms = (now_ms / every_ms + 1) * every_ms + every_ms / 2;
    let end_ms = start_ms + ticks * every_ms;
    let measured: Vec<i64> = (1..=ticks)
        .map(|k| start_ms - every_ms / 2 + k * every_ms)
        .collect();
    let loads = Arc::new(Mutex::new(Vec::new()));
    let sampler = {
        let loads = Arc::clone(&loads);
        tokio::spawn(async move {
            loop {
                let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
                if let Some(one) = text.split(' ').next().and_then(|v| v.parse::<f64>().ok()) {
                    loads.lock().unwrap().push(one);
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        })
    };
    sleep_until(start_ms).await;

    // The kill: the node whose handler of the kill tick started first, `kill_after` later.
    let mut kill = None;
    if kill_tick > 0 {
        let tick = measured[kill_tick as usize - 1];
        sleep_until(tick).await;
        let first = loop {
            let started = read_records(&dir, nodes)
                .into_iter()
                .filter(|l| l.start && l.tick == tick)
                .min_by_key(|l| l.at);
            if let Some(l) = started {
                break l;
            }
            assert!(
                Utc::now().timestamp_millis() < tick + every_ms,
                "no shard of the kill tick started"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        sleep_until(first.at + kill_after).await;
        let victim: usize = first.node[1..].parse().unwrap();
        let mut child = procs[victim].take().unwrap();
        child.kill().expect("SIGKILL the node");
        let killed_at = Utc::now().timestamp_millis();
        let _ = child.wait();
        kill = Some((tick, first.node.clone(), killed_at));
    }

    // The window, then until every shard of every measured tick ended (or a minute more).
    sleep_until(end_ms).await;
    let deadline = end_ms + 60_000;
    loop {
        let ledger = ledger(&read_records(&dir, nodes));
        let done = measured
            .iter()
            .all(|t| (0..shards).all(|s| ledger.get(&(*t, s)).is_some_and(|e| !e.ends.is_empty())));
        if done || Utc::now().timestamp_millis() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    sampler.abort();
    let loads = loads.lock().unwrap().clone();
    for child in procs.iter().flatten() {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
    }
    for child in procs.iter_mut().flatten() {
        let _ = child.wait();
    }

    // The handlers' record.
    let lines = read_records(&dir, nodes);
    let ledger = ledger(&lines);
    let victim = kill.as_ref().map(|k| k.1.clone());
    let ended_runs: BTreeSet<i64> = lines.iter().filter(|l| !l.start).map(|l| l.run).collect();
    // A start the kill cut short: the victim's, with no end.
    let cut = |l: &Line| Some(&l.node) == victim.as_ref() && !ended_runs.contains(&l.run);
    let at = DateTime::<Utc>::from_timestamp_millis(measured[0]).unwrap();
    println!(
        "{nodes} nodes x 1 task of {shards} shards every {every} s, {ticks} ticks measured from \
         {} UTC; handlers work {work_ms} ms; lock lifetime {}",
        at.format("%H:%M:%S"),
        lifetime.map_or("20 s (default)".into(), |l| format!("{l} s"))
    );
    let loads_text = if loads.is_empty() {
        "-".to_owned()
    } else {
        format!(
            "{:.2}..{:.2} (mean {:.2}, {} samples)",
            loads.iter().copied().fold(f64::MAX, f64::min),
            loads.iter().copied().fold(0.0, f64::max),
            loads.iter().sum::<f64>() / loads.len() as f64,
            loads.len()
        )
    };
    println!("load average (1 min) during the run: {loads_text}");
    if let Some((tick, node, killed_at)) = &kill {
        println!(
            "node {node} killed (SIGKILL) {} ms after tick {}",
            killed_at - tick,
            DateTime::<Utc>::from_timestamp_millis(*tick)
                .unwrap()
                .format("%H:%M:%S")
        );
    }
    println!();
    println!(
        "| tick | shards ended / expected | ran twice | not run | nodes | shards per node min..max \
         | started within the 2 s grace | start lag min ms | p50 ms | p99 ms | max ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let (mut twice_all, mut missing_all) = (0usize, 0usize);
    let mut calm_lags = Vec::new();
    let mut calm_spread = (u32::MAX, 0u32);
    let mut per_tick: Vec<Vec<u32>> = Vec::new();
    for (k, tick) in measured.iter().enumerate() {
        let k = k as i64 + 1;
        let mut per_node: BTreeMap<String, u32> = BTreeMap::new();
        // Nodes alive at the tick.
        for i in 0..nodes {
            let n = node_name(i);
            if kill_tick == 0 || k <= kill_tick || Some(&n) != victim.as_ref() {
                per_node.insert(n, 0);
            }
        }
        let (mut ended, mut twice, mut missing) = (0, 0, 0);
        let mut lags = Vec::new();
        for s in 0..shards {
            let Some(e) = ledger.get(&(*tick, s)) else {
                missing += 1;
                continue;
            };
            if e.ends.is_empty() {
                missing += 1;
            } else {
                ended += 1;
            }
            let cut_short = e.starts.iter().filter(|l| cut(l)).count();
            twice += (e.starts.len() - cut_short)
                .max(e.ends.len())
                .saturating_sub(1);
            if let Some(first) = e.starts.first() {
                *per_node.entry(first.node.clone()).or_default() += 1;
                lags.push((first.at - tick) as f64);
            }
        }
        let (lo, hi) = (
            per_node.values().copied().min().unwrap_or(0),
            per_node.values().copied().max().unwrap_or(0),
        );
        if kill_tick == 0 || k < kill_tick {
            calm_lags.extend(&lags);
            calm_spread = (calm_spread.0.min(lo), calm_spread.1.max(hi));
        }
        twice_all += twice;
        missing_all += missing;
        let mark = if k == kill_tick { " (kill)" } else { "" };
        println!(
            "| {}{mark} | {ended} / {shards} | {twice} | {missing} | {} | {lo}..{hi} | {} | {} |",
            DateTime::<Utc>::from_timestamp_millis(*tick)
                .unwrap()
                .format("%H:%M:%S"),
            per_node.len(),
            within_grace(&lags),
            pcts(&lags)
        );
        per_tick.push(per_node.into_values().collect::<Vec<_>>());
    }
    println!();
    println!("shards per node, each tick (first starts, nodes alive at the tick, by name):");
    for (tick, counts) in measured.iter().zip(&per_tick) {
        println!(
            "  {}: {counts:?}",
            DateTime::<Utc>::from_timestamp_millis(*tick)
                .unwrap()
                .format("%H:%M:%S")
        );
    }
    println!();
    if calm_spread.0 != u32::MAX {
        println!(
            "before the kill: shards per node {}..{} per tick, start lag min/p50/p99/max {} ms \
             ({} shards, {} within the grace)",
            calm_spread.0,
            calm_spread.1,
            pcts(&calm_lags).replace(" | ", "/"),
            calm_lags.len(),
            within_grace(&calm_lags)
        );
    }
    if let Some((tick, node, killed_at)) = &kill {
        // The victim's shards of the kill tick: started by it, cut short, started again.
        let mut taken = Vec::new();
        let mut by = BTreeMap::<String, u32>::new();
        let mut lost = 0;
        for s in 0..shards {
            let Some(e) = ledger.get(&(*tick, s)) else {
                continue;
            };
            if !e.starts.iter().any(cut) {
                continue;
            }
            match e.starts.iter().find(|l| &l.node != node) {
                Some(again) => {
                    taken.push((again.at - killed_at) as f64);
                    *by.entry(again.node.clone()).or_default() += 1;
                }
                None => lost += 1,
            }
        }
        let victim_first: usize = ledger
            .iter()
            .filter(|((t, _), e)| t == tick && e.starts.first().is_some_and(|l| &l.node == node))
            .count();
        println!(
            "takeover: {node} had started {victim_first} shards of the kill tick, {} cut short by \
             the kill; {} started again elsewhere, {lost} not; started again min/p50/p99/max {} ms \
             after the kill, by {} nodes {by:?}",
            taken.len() + lost,
            taken.len(),
            pcts(&taken).replace(" | ", "/"),
            by.len()
        );
    }
    println!(
        "handlers' record: {} shards of {} ticks ran twice, {} did not run",
        twice_all,
        measured.len(),
        missing_all
    );
    if std::env::var_os("SHARDS_KEEP").is_some() {
        println!("records and node output kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
