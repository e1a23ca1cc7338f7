//! `instances`: three nodes run the instances of one task (`f.inst`), which the harness makes,
//! changes and removes for `--minutes` (one change every 250-750 ms, half from Rust through
//! `Schedules`, half through a live node's admin API), while every 4 to 12 s one node is
//! SIGKILLed (20-130 ms after a tick, while that second's runs are in flight) and started again
//! 1 to 3 s later.
//!
//! Each instance is judged as a schedule of its own (its runs are recorded under its row's
//! name, `f.inst/KEY`): every tick due after its upsert answered runs once, none twice, no two
//! runs of it at once. A removed instance or a changed cron is not judged from one second before
//! the request (a tick due then may or may not start) until the new cron's answer. And no
//! instance starts a tick due after its removal was answered (until it is made again), but for
//! one a node had claimed ahead before it (at most 100 µs a row ahead of the tick: under
//! [`CLAIMED_AHEAD_MS`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use scheduler::store::PgStore;
use scheduler::{Schedule, Schedules, TaskRegistry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::harness::{NodeSpec, Options, Outcome, Result, Scenario};
use crate::record::Ev;
use crate::timeline::now_ms;

/// The task whose instances are made (`fault_node` registers it; so must the harness).
pub const TASK: &str = "f.inst";
/// The bearer token of the nodes' admin servers.
const TOKEN: &str = "faults-instances-token";
/// Keys the changes pick from.
const KEYS: usize = 60;
/// A key is left alone this long after its last change (the judge's segments stay in order).
const SETTLE: Duration = Duration::from_secs(3);
/// Ticks this close before a removal or a cron change are not judged.
const UNSURE_MS: i64 = 1_000;
/// A tick due this soon after a removal was answered may have been claimed before it: a node
/// claims a tick up to 100 µs per row ahead of its time (`max_claim_ahead` caps it), under 10 ms
/// for this scenario's rows, and a claimed tick runs as a run in flight does.
const CLAIMED_AHEAD_MS: i64 = 50;
/// Longer than a takeover (lock lifetime 3 s + poll 1 s).
const TAKEOVER: Duration = Duration::from_secs(5);
const CRONS: [&str; 2] = ["* * * * * *", "*/2 * * * * *"];

/// A change the harness asks for.
enum Change {
    Upsert(&'static str),
    Remove,
}

pub(super) async fn run(opts: &Options) -> Result<Outcome> {
    let mut sc = Scenario::new("instances", opts).await?;
    sc.params.takeover = true;
    sc.write_config(&[(TASK, "0 0 0 1 1 *")])?;
    let mut ports = Vec::new();
    for id in ["a", "b", "c"] {
        let port = free_port()?;
        ports.push(port);
        sc.fleet.add(NodeSpec {
            id: id.into(),
            config: sc.config_path.to_string_lossy().into_owned(),
            skew: None,
            env: vec![
                ("SCHEDULER_ADMIN_ADDR".into(), format!("127.0.0.1:{port}")),
                ("SCHEDULER_ADMIN_TOKEN".into(), TOKEN.into()),
            ],
        });
    }
    sc.start_all()?;
    let url = sc.cluster()?.url();
    let store = PgStore::builder(url).connect_lazy()?;
    let registry = TaskRegistry::collect()?.retain(|n| n == TASK);
    let schedules = Schedules::new(Arc::new(store), &registry, "faults");

    // Wait for the task's row (the nodes' first reconcile): instances of it are refused before.
    let ready = Instant::now() + Duration::from_secs(60);
    loop {
        match schedules.list(TASK).await {
            Ok(_) if upsert_rust(&schedules, "k00", CRONS[0]).await.is_ok() => break,
            _ if Instant::now() > ready => return Err("the task's row never appeared".into()),
            _ => sc.idle(Duration::from_millis(200)).await,
        }
    }
    let mut live: BTreeMap<String, &'static str> = BTreeMap::new();
    let mut last_change: BTreeMap<String, Instant> = BTreeMap::new();
    // Per key, from when it was surely gone (its removal answered) to when it was asked for
    // again (`None`: still gone).
    let mut gone: BTreeMap<String, Vec<(i64, Option<i64>)>> = BTreeMap::new();
    live.insert("k00".into(), CRONS[0]);
    last_change.insert("k00".into(), Instant::now());
    note(&mut sc, &live, now_ms());

    let end = Instant::now() + Duration::from_secs_f64(opts.minutes * 60.0);
    let mut next_kill = Instant::now() + Duration::from_millis(sc.rng.range(4_000, 12_001));
    let mut restart: Option<(usize, Instant)> = None;
    let (mut by_rust, mut by_api, mut retried) = (0usize, 0usize, 0usize);
    let (mut made, mut changed, mut removed, mut kills) = (0usize, 0usize, 0usize, 0usize);
    while Instant::now() < end {
        if let Some((victim, at)) = restart
            && Instant::now() >= at
        {
            sc.fleet.start(victim, &mut sc.timeline)?;
            restart = None;
        }
        if restart.is_none() && Instant::now() >= next_kill {
            sc.idle_until_just_after_a_tick().await;
            let up = sc.fleet.up();
            if let Some(&victim) = sc.rng.pick(&up) {
                let pid = sc.sigkill(victim);
                kills += 1;
                // The instances whose runs died with it are left alone until they are taken
                // over (the takeover time is then theirs, not a removal's).
                sc.look();
                for key in in_flight_on(&sc, pid) {
                    last_change.insert(key, Instant::now() + TAKEOVER);
                }
                let down = Duration::from_millis(sc.rng.range(1_000, 3_001));
                restart = Some((victim, Instant::now() + down));
            }
            next_kill = Instant::now() + Duration::from_millis(sc.rng.range(4_000, 12_001));
        }

        // One change to a key not changed in the last SETTLE.
        let key = format!("k{:02}", sc.rng.range(0, KEYS as u64));
        if last_change
            .get(&key)
            .is_some_and(|at| at.elapsed() < SETTLE)
        {
            sc.idle(Duration::from_millis(50)).await;
            continue;
        }
        let change = match live.get(&key) {
            None => Change::Upsert(CRONS[sc.rng.range(0, 2) as usize]),
            Some(cron) if sc.rng.chance(0.5) => Change::Upsert(if *cron == CRONS[0] {
                CRONS[1]
            } else {
                CRONS[0]
            }),
            Some(_) => Change::Remove,
        };
        let asked = now_ms();
        if let Some((_, until @ None)) = gone.get_mut(&key).and_then(|spans| spans.last_mut()) {
            *until = Some(asked);
        }
        if live.contains_key(&key) {
            // From a second before the request, a tick of the old schedule may or may not run.
            let mut unsure = live.clone();
            unsure.remove(&key);
            note(&mut sc, &unsure, asked - UNSURE_MS);
        }
        let through_api = sc.rng.chance(0.5);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let done = if through_api {
                let up = sc.fleet.up();
                match sc.rng.pick(&up) {
                    Some(&i) => api(ports[i], &key, &change).await,
                    None => Err("no node is up".into()),
                }
            } else {
                match &change {
                    Change::Upsert(cron) => upsert_rust(&schedules, &key, cron).await,
                    Change::Remove => schedules
                        .remove(TASK, &key)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                }
            };
            match done {
                Ok(()) => break,
                Err(e) if attempts < 20 => {
                    if attempts == 1 {
                        retried += 1;
                    }
                    tracing::debug!(%key, error = %e, "a change failed; again");
                    sc.idle(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(format!("{key}: 20 attempts failed: {e}").into()),
            }
        }
        let answered = now_ms();
        match change {
            Change::Upsert(cron) => {
                if live.insert(key.clone(), cron).is_some() {
                    changed += 1;
                } else {
                    made += 1;
                }
            }
            Change::Remove => {
                live.remove(&key);
                gone.entry(key.clone()).or_default().push((answered, None));
                removed += 1;
            }
        }
        note(&mut sc, &live, answered);
        last_change.insert(key, Instant::now());
        if through_api {
            by_api += 1;
        } else {
            by_rust += 1;
        }
        let pause = Duration::from_millis(sc.rng.range(250, 751));
        sc.idle(pause).await;
    }
    if let Some((victim, _)) = restart {
        sc.fleet.start(victim, &mut sc.timeline)?;
    }
    // The runs of the last changes' ticks start and are recorded.
    sc.idle(Duration::from_secs(3)).await;
    let (after_removal, claimed_before) = started_when_gone(&sc, &gone);
    sc.notes.push(format!(
        "{claimed_before} ticks due within {CLAIMED_AHEAD_MS} ms after their instance's removal was answered started (claimed ahead before it, as a run in flight)"
    ));
    sc.notes.push(format!(
        "{} changes of instances of {TASK} ({made} made, {changed} cron changes, {removed} removed; {by_rust} from Rust, {by_api} through a node's admin API; {retried} tried again after a failure), {} live at the end; {kills} SIGKILLs, each node started again 1-3 s later",
        made + changed + removed,
        live.len()
    ));
    let mut outcome = sc.finish().await?;
    outcome.verdict.ran_after_removal = after_removal;
    Ok(outcome)
}

/// The keys of the instances with a run started and not ended in process `pid`.
fn in_flight_on(sc: &Scenario, pid: u32) -> Vec<String> {
    let mut open: BTreeMap<i64, String> = BTreeMap::new();
    for r in sc.tail.records().iter().filter(|r| r.pid == pid) {
        let Some(key) = r.task.strip_prefix(TASK).and_then(|k| k.strip_prefix('/')) else {
            continue;
        };
        match r.ev {
            Ev::Start => {
                open.insert(r.run_id, key.to_owned());
            }
            Ev::End => {
                open.remove(&r.run_id);
            }
            Ev::Beat => {}
        }
    }
    open.into_values().collect()
}

/// Starts of an instance for a tick inside one of its `gone` spans, past the claim ahead of
/// the span's start; and how many fell within that claim ahead.
fn started_when_gone(
    sc: &Scenario,
    gone: &BTreeMap<String, Vec<(i64, Option<i64>)>>,
) -> (Vec<String>, usize) {
    let mut found = Vec::new();
    let mut claimed_before = 0;
    for r in sc.tail.records() {
        let Some(key) = r.task.strip_prefix(TASK).and_then(|k| k.strip_prefix('/')) else {
            continue;
        };
        if r.ev != Ev::Start {
            continue;
        }
        let tick = r.tick.timestamp_millis();
        if let Some((from, _)) = gone.get(key).and_then(|spans| {
            spans
                .iter()
                .find(|(from, until)| tick > *from && until.is_none_or(|u| tick < u))
        }) {
            if tick <= from + CLAIMED_AHEAD_MS {
                claimed_before += 1;
                continue;
            }
            let removed = chrono::DateTime::from_timestamp_millis(*from).unwrap_or_default();
            found.push(format!(
                "{} tick {} started on {} although its removal was answered at {}",
                r.task,
                r.tick.format("%H:%M:%S%.3f"),
                r.node,
                removed.format("%H:%M:%S%.3f")
            ));
        }
    }
    (found, claimed_before)
}

/// Notes `live` (with the task's own yearly row) as the schedule from `at_ms`.
fn note(sc: &mut Scenario, live: &BTreeMap<String, &'static str>, at_ms: i64) {
    let mut entries: Vec<(String, Option<String>)> = live
        .iter()
        .map(|(key, cron)| (format!("{TASK}/{key}"), Some((*cron).to_owned())))
        .collect();
    entries.push((TASK.to_owned(), Some("0 0 0 1 1 *".to_owned())));
    sc.note_schedule(at_ms, &entries);
}

async fn upsert_rust(
    schedules: &Schedules,
    key: &str,
    cron: &str,
) -> std::result::Result<(), String> {
    schedules
        .upsert(Schedule::new(TASK, key).cron(cron))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The change through the admin API on `port`: a plain HTTP/1.1 request, its status judged.
async fn api(port: u16, key: &str, change: &Change) -> std::result::Result<(), String> {
    let path = format!("/api/tasks/{TASK}/instances/{key}");
    let (method, body) = match change {
        Change::Upsert(cron) => ("PUT", serde_json::json!({ "cron": cron }).to_string()),
        Change::Remove => ("DELETE", String::new()),
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\
         X-Scheduler-Actor: faults\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| "no answer within 10 s".to_owned())?
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&answer);
    let status = text.split(' ').nth(1).unwrap_or("");
    match (status, change) {
        ("200", _) => Ok(()),
        // Removed already (an earlier attempt whose answer was lost).
        ("404", Change::Remove) => Ok(()),
        _ => Err(format!(
            "{method} {path}: {}",
            text.lines().next().unwrap_or("no answer")
        )),
    }
}

/// A free port on 127.0.0.1 (bound, then let go for the node to take).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
