//! Many node processes on one PostgreSQL schema: schedule lag, each node's share of the runs,
//! ticks run twice or not at all, statements and NOTIFY wake-ups per node, connections, memory.
//!
//! `scripts/bench scale` (a throwaway cluster preloading `pg_stat_statements`). Knobs:
//! `SCALE_NODES` (3), `SCALE_TASKS` (2000), `SCALE_EVERY` seconds (10), `SCALE_SECONDS` measured
//! (60), `SCALE_MAX_CONCURRENT` (node default), `SCALE_IDLE=1` (the tasks run yearly: nothing
//! is due, for the idle load), `SCALE_KEEP=1` (keep the nodes' records and logs),
//! `SCALE_INSTANCES=N` (instead of tasks: one task `s.00000` whose own row runs yearly, and N
//! instances of it `k000000`.. on the cron, made through `Schedules::upsert_many` once the nodes are up,
//! `SCALE_CREATE_BATCH` (500) a list, `SCALE_CREATE_AT_ONCE` (4) lists at a time; their making is timed). Each node is
//! a `scale_node` process connecting as its own role `scale_node_NN`, so `pg_stat_statements`
//! (keyed by role) and `pg_stat_activity` count statements and connections per node on the
//! server. The roles are superusers: run this on a throwaway cluster only. The nodes' CPU time
//! (user and system, their whole life, from `/proc/self/stat`) is summed in the report.
//!
//! Judged by the handlers' own record: each node writes (task, tick, start) of every run it
//! started; a (task, tick) in two records ran twice. Only ticks inside the measured window count;
//! the window starts after one whole tick of warm-up and ends half an interval after a tick.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use scheduler_bench::engine_support::*;
use scheduler_bench::node_procs::{sibling, sleep_until, wait_registered};
use sqlx::Row;

const SCHEMA: &str = "bench_scale";

fn role(i: usize) -> String {
    format!("scale_node_{i:02}")
}

struct Node {
    child: Child,
    record: std::path::PathBuf,
}

#[tokio::main]
async fn main() {
    let nodes = knob("SCALE_NODES", 3) as usize;
    let tasks = knob("SCALE_TASKS", 2000) as usize;
    let every = knob("SCALE_EVERY", 10) as i64;
    let seconds = knob("SCALE_SECONDS", 60) as i64;
    assert!(
        (1..=60).contains(&every) && 60 % every == 0,
        "SCALE_EVERY must divide 60"
    );
    let url = database_url();
    let admin = sqlx::PgPool::connect(&url).await.expect("connect");
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&admin)
        .await
        .expect("pg_stat_statements must be preloaded (scripts/bench starts such a cluster)");
    fresh_schema(&url, SCHEMA).await.close().await;
    for i in 0..nodes {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DO $$ BEGIN CREATE ROLE {r} LOGIN SUPERUSER; \
             EXCEPTION WHEN duplicate_object THEN NULL; END $$",
            r = role(i)
        )))
        .execute(&admin)
        .await
        .unwrap();
    }
    let dir = std::env::temp_dir().join(format!("scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = sibling("scale_node");
    let idle = std::env::var("SCALE_IDLE").is_ok_and(|v| v == "1");
    let instances = knob("SCALE_INSTANCES", 0) as usize;
    let cron = if idle {
        "0 0 1 1 *".to_owned()
    } else {
        // Every minute is second 0 (`*/60` is no step of the seconds' field).
        if every == 60 {
            "0 * * * * *".to_owned()
        } else {
            format!("*/{every} * * * * *")
        }
    };
    // With instances, the nodes' one task runs yearly; its instances run on `cron`.
    let (tasks, node_cron) = if instances > 0 {
        (1, "0 0 1 1 *".to_owned())
    } else {
        (tasks, cron.clone())
    };
    let mut procs: Vec<Node> = (0..nodes)
        .map(|i| {
            let mut node_url = url::Url::parse(&url).expect("DATABASE_URL is a URL");
            node_url.set_username(&role(i)).unwrap();
            let _ = node_url.set_password(None);
            let record = dir.join(format!("{}.txt", role(i)));
            let log = std::fs::File::create(dir.join(format!("{}.log", role(i)))).unwrap();
            let mut cmd = Command::new(&exe);
            cmd.env("DATABASE_URL", node_url.as_str())
                .env("SCALE_SCHEMA", SCHEMA)
                .env("SCALE_NODE_ID", role(i))
                .env("SCALE_TASKS", tasks.to_string())
                .env("SCALE_CRON", &node_cron)
                .env("SCALE_RECORD", &record)
                .stdout(Stdio::null())
                .stderr(log);
            if let Ok(n) = std::env::var("SCALE_MAX_CONCURRENT") {
                cmd.env("SCALE_MAX_CONCURRENT", n);
            }
            Node {
                child: cmd
                    .spawn()
                    .expect("start scale_node (build the bench bins)"),
                record,
            }
        })
        .collect();

    // Every node registered, then one whole tick of warm-up.
    wait_registered(&admin, SCHEMA, nodes, Duration::from_secs(120)).await;
    if instances > 0 {
        make_instances(&url, instances, &cron).await;
    }
    let every_ms = every * 1000;
    let now_ms = Utc::now().timestamp_millis();
    // Mid-interval, after the next tick: no tick on the window's edges.
    let start_ms = (now_ms / every_ms + 1) * every_ms + every_ms / 2;
    let end_ms = start_ms + (seconds * 1000).div_euclid(every_ms).max(1) * every_ms;
    sleep_until(start_ms).await;

    let channel = scheduler::store::PgStore::connect_lazy(&url, SCHEMA, 2)
        .unwrap()
        .notify_channel()
        .to_owned();
    let mut listener = sqlx::postgres::PgListener::connect(&url).await.unwrap();
    listener.listen(&channel).await.unwrap();
    let notified = Arc::new(AtomicU64::new(0));
    let counter = {
        let notified = Arc::clone(&notified);
        tokio::spawn(async move {
            while listener.recv().await.is_ok() {
                notified.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(&admin)
        .await
        .unwrap();
    let postmaster = postmaster_pid(&admin).await;
    let node_pids: Vec<u32> = procs.iter().map(|n| n.child.id()).collect();
    let cpu_at_start = (cpu_of(&node_pids), postgres_cpu(postmaster));
    let mut conns_max: HashMap<String, i64> = HashMap::new();
    let mut conns_total_max = 0i64;
    while Utc::now().timestamp_millis() < end_ms {
        let rows = sqlx::query(
            "SELECT usename::text AS u, count(*) AS n FROM pg_stat_activity
             WHERE usename LIKE 'scale_node_%' GROUP BY 1",
        )
        .fetch_all(&admin)
        .await
        .unwrap();
        let mut total = 0;
        for r in rows {
            let n: i64 = r.get("n");
            total += n;
            let e = conns_max.entry(r.get("u")).or_default();
            *e = (*e).max(n);
        }
        conns_total_max = conns_total_max.max(total);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    sleep_until(end_ms).await;
    let cpu_in_window = (
        cpu_of(&node_pids).saturating_sub(cpu_at_start.0),
        postgres_cpu(postmaster).saturating_sub(cpu_at_start.1),
    );
    let wakeups = notified.load(Ordering::Relaxed);
    counter.abort();
    let per_role: HashMap<String, i64> = sqlx::query(
        "SELECT r.rolname::text AS u, sum(s.calls)::int8 AS n FROM pg_stat_statements s
         JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname LIKE 'scale_node_%' GROUP BY 1",
    )
    .fetch_all(&admin)
    .await
    .unwrap()
    .into_iter()
    .map(|r| (r.get("u"), r.get("n")))
    .collect();
    let top = sqlx::query(
        "SELECT sum(s.calls)::int8 AS calls, sum(s.total_exec_time)::float8 AS ms,
                left(regexp_replace(s.query, '\\s+', ' ', 'g'), 60) AS q
         FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
         WHERE r.rolname LIKE 'scale_node_%' GROUP BY 3 ORDER BY 1 DESC LIMIT 12",
    )
    .fetch_all(&admin)
    .await
    .unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();

    for node in &procs {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(node.child.id().to_string())
            .status();
    }
    for node in &mut procs {
        let _ = node.child.wait();
    }

    // The handlers' record.
    let mut seen: HashMap<(u32, i64), u32> = HashMap::new();
    let mut lags = Vec::new();
    let mut shares = Vec::new();
    let mut rss = Vec::new();
    let mut replaced = 0u64;
    // The node processes' CPU time, user and system, in clock ticks (100 a second), summed.
    let mut cpu = (0u64, 0u64);
    for node in &procs {
        let text = std::fs::read_to_string(&node.record)
            .unwrap_or_else(|e| panic!("{}: {e} (see its .log)", node.record.display()));
        let mut runs = 0u64;
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.first() == Some(&"#") && f.get(1) == Some(&"replaced") {
                replaced += f[2].parse::<u64>().unwrap();
                continue;
            }
            if f.first() == Some(&"#") && f.get(1) == Some(&"cpu_ticks") {
                cpu.0 += f[2].parse::<u64>().unwrap();
                cpu.1 += f[3].parse::<u64>().unwrap();
                continue;
            }
            if f.first() == Some(&"#") {
                rss.push((
                    f[2].parse::<u64>().unwrap(),
                    f[3].parse::<u64>().unwrap(),
                    f[4].parse::<u64>().unwrap(),
                ));
                continue;
            }
            let (task, tick, start): (u32, i64, i64) = (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            );
            if tick <= start_ms || tick >= end_ms {
                continue;
            }
            runs += 1;
            *seen.entry((task, tick)).or_default() += 1;
            lags.push((start - tick) as f64);
        }
        shares.push(runs);
    }
    let ticks = (end_ms - start_ms) / every_ms;
    let scheduled = if instances > 0 { instances } else { tasks };
    let expected = if idle {
        0
    } else {
        ticks as u64 * scheduled as u64
    };
    let twice: u64 = seen
        .values()
        .filter(|&&n| n > 1)
        .map(|&n| u64::from(n) - 1)
        .sum();
    let missing = expected - seen.len() as u64;
    let total: u64 = shares.iter().sum();
    let even = total as f64 / nodes as f64;
    let share = |f: fn(&u64, &u64) -> std::cmp::Ordering| {
        shares.iter().copied().max_by(f).unwrap_or(0) as f64 / even * 100.0
    };
    let window_s = (end_ms - start_ms) as f64 / 1000.0;
    let per_minute: Vec<i64> = (0..nodes)
        .map(|i| *per_role.get(&role(i)).unwrap_or(&0))
        .collect();
    let stmts: Vec<f64> = (0..nodes)
        .map(|i| *per_role.get(&role(i)).unwrap_or(&0) as f64 / window_s)
        .collect();
    let mib = |kb: u64| kb as f64 / 1024.0;
    let at = DateTime::<Utc>::from_timestamp_millis(start_ms).unwrap();
    println!(
        "{nodes} nodes x {scheduled} {} {}, {ticks} intervals measured from {} UTC; \
         load average at the end: {}",
        if instances > 0 {
            "instances of one task"
        } else {
            "tasks"
        },
        if idle {
            "none due".to_owned()
        } else {
            format!("every {every} s")
        },
        at.format("%H:%M:%S"),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!();
    println!(
        "| nodes x tasks | runs / expected | ran twice | missing | lag p50 ms | p99 ms | max ms \
         | share min..max of even | statements/s per node (mean, max) | NOTIFY wake-ups/s per node \
         | connections per node (max), all nodes | RSS MiB per node: rest..burst (max) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut l = lags.clone();
    let pct = |l: &mut Vec<f64>, p| {
        if l.is_empty() {
            f64::NAN
        } else {
            percentile(l, p)
        }
    };
    println!(
        "| {nodes} x {scheduled} | {total} / {expected} | {twice} | {missing} | {:.0} | {:.0} | {:.0} \
         | {:.0}%..{:.0}% | {:.1}, {:.1} | {:.2} | {}, {conns_total_max} | {:.1}..{:.1} ({:.1}) |",
        pct(&mut l, 50.0),
        pct(&mut l, 99.0),
        pct(&mut l, 100.0),
        share(|a, b| b.cmp(a)),
        share(|a, b| a.cmp(b)),
        stmts.iter().sum::<f64>() / nodes as f64,
        stmts.iter().copied().fold(0.0, f64::max),
        wakeups as f64 / window_s,
        conns_max.values().max().copied().unwrap_or(0),
        mib(rss.iter().map(|r| r.0).min().unwrap_or(0)),
        mib(rss.iter().map(|r| r.1).max().unwrap_or(0)),
        mib(rss.iter().map(|r| r.2).max().unwrap_or(0)),
    );
    println!();
    println!("runs per node: {shares:?}");
    println!("handler threads replaced as held, all nodes: {replaced}");
    println!(
        "node processes' CPU, all nodes, whole life: user {:.2} s, system {:.2} s",
        cpu.0 as f64 / 100.0,
        cpu.1 as f64 / 100.0
    );
    // Ticks in clock ticks (100 a second) to microseconds per run.
    let per_run = |ticks: u64| ticks as f64 * 10_000.0 / total.max(1) as f64;
    println!(
        "CPU per run in the window ({total} runs): nodes {:.1} µs, PostgreSQL (every process of \
         the cluster, exited backends included) {:.1} µs, together {:.1} µs",
        per_run(cpu_in_window.0),
        per_run(cpu_in_window.1),
        per_run(cpu_in_window.0 + cpu_in_window.1)
    );
    println!(
        "statements per node per minute: {:?}",
        per_minute
            .iter()
            .map(|n| (*n as f64 / window_s * 60.0 * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    println!("statements per node in {window_s:.0} s, busiest first (all nodes, summed):");
    for r in top {
        println!(
            "  {:>8} calls {:>9.1} ms  {}",
            r.get::<i64, _>("calls"),
            r.get::<f64, _>("ms"),
            r.get::<String, _>("q")
        );
    }
    if std::env::var_os("SCALE_KEEP").is_some() {
        println!("node records and logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Makes instances `k000000`.. of `s.00000` on `cron` through `Schedules` (the Rust API, as an
/// application would) once the nodes have written the task, in lists of `SCALE_CREATE_BATCH`
/// (500; `Schedules::upsert_many`), `SCALE_CREATE_AT_ONCE` lists at a time (4); prints how
/// long it took.
async fn make_instances(url: &str, n: usize, cron: &str) {
    let registry = scheduler_bench::engine_support::registry_with("s.", 1, noop);
    let store = pg_store(url, SCHEMA);
    let schedules = scheduler::Schedules::new(store, &registry, "bench");
    let at_once = knob("SCALE_CREATE_AT_ONCE", 4).max(1) as usize;
    let batch = knob("SCALE_CREATE_BATCH", 500).clamp(1, 1000) as usize;
    let make = |keys: std::ops::Range<usize>| {
        let schedules = schedules.clone();
        let cron = cron.to_owned();
        async move {
            let list: Vec<scheduler::Schedule> = keys
                .map(|i| scheduler::Schedule::new("s.00000", format!("k{i:06}")).cron(&cron))
                .collect();
            loop {
                match schedules.upsert_many(list.clone()).await {
                    Ok(answers) => {
                        let refused: Vec<String> = answers
                            .into_iter()
                            .filter_map(|a| a.err().map(|e| e.to_string()))
                            .collect();
                        if refused
                            .first()
                            .is_some_and(|e| e.contains("not in the store"))
                        {
                            // The nodes' reconcile writes the task shortly after they register.
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                        assert!(refused.is_empty(), "instances refused: {refused:?}");
                        return;
                    }
                    Err(e) => panic!("instances: {e}"),
                }
            }
        }
    };
    make(0..1).await;
    let started = std::time::Instant::now();
    let mut next = 1;
    let mut running = tokio::task::JoinSet::new();
    while next < n || !running.is_empty() {
        while next < n && running.len() < at_once {
            let end = (next + batch).min(n);
            running.spawn(make(next..end));
            next = end;
        }
        running.join_next().await.unwrap().unwrap();
    }
    let took = started.elapsed().as_secs_f64();
    println!(
        "made {} instances through Schedules::upsert_many (lists of {batch}, {at_once} at once) in {took:.2} s ({:.0} a second)",
        n - 1,
        (n - 1) as f64 / took
    );
}

/// The PostgreSQL server's postmaster (the bench runs on the cluster's machine).
async fn postmaster_pid(admin: &sqlx::PgPool) -> u32 {
    let dir: String = sqlx::query_scalar("SHOW data_directory")
        .fetch_one(admin)
        .await
        .unwrap();
    std::fs::read_to_string(std::path::Path::new(&dir).join("postmaster.pid"))
        .expect("the cluster's postmaster.pid (run on the server's machine)")
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("a pid in postmaster.pid")
}

/// `/proc/PID/stat`'s CPU fields (clock ticks): user, system, children's user and system.
fn stat_cpu(pid: u32) -> Option<(u32, [u64; 4])> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: state is field 3, ppid 4, utime 14 .. cstime 17.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i - 3).and_then(|v| v.parse().ok());
    Some((n(4)? as u32, [n(14)?, n(15)?, n(16)?, n(17)?]))
}

/// The CPU time (clock ticks) the processes `pids` have used, user and system.
fn cpu_of(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| stat_cpu(*p))
        .map(|(_, c)| c[0] + c[1])
        .sum()
}

/// The CPU time (clock ticks) the PostgreSQL cluster of `postmaster` has used: the postmaster,
/// every live child, and the children that exited (counted in the postmaster's own figures).
fn postgres_cpu(postmaster: u32) -> u64 {
    let own = stat_cpu(postmaster).map_or(0, |(_, c)| c.iter().sum());
    let children: u64 = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat_cpu)
        .filter(|(ppid, _)| *ppid == postmaster)
        .map(|(_, c)| c.iter().sum::<u64>())
        .sum();
    own + children
}

fn noop(_: scheduler::TaskContext) -> scheduler::__private::TaskFuture {
    Box::pin(async { Ok(()) })
}
