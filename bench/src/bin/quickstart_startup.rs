//! Start-up of the quickstart (`examples/quickstart.rs`, release build) to its first run, on the
//! embedded SQLite store (no server) and on a running PostgreSQL: the process is spawned, and the
//! times are taken when its log says `scheduler running` (migrated, config applied, ready to
//! claim) and when the first handler logs. Every round starts on an empty store (a fresh file or
//! schema), so migrations are included, at a random phase of the clock. The first run waits for
//! the next whole second (the task runs every second), so spawn -> first run is ready + 0-1 s
//! + the first run's lag after its tick.
//!
//! `scripts/bench quickstart_startup` (needs QUICKSTART_BIN, the built example;
//! `BENCH_BACKENDS`; `QUICKSTART_ROUNDS`, default 7).

use std::process::Stdio;
use std::time::{Duration, Instant};

use scheduler_bench::engine_support::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// (ready ms after spawn, first run ms after spawn, first run's lag after its tick in ms).
async fn round(bin: &str, backend: Backend, config: &std::path::Path, i: usize) -> (f64, f64, f64) {
    let mut cmd = Command::new(bin);
    cmd.env("SCHEDULER_CONFIG", config)
        .env("RUST_LOG", "info")
        .env_remove("SCHEDULER_DATABASE_URL")
        .env_remove("SCHEDULER_SCHEMA")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    match backend {
        Backend::Sqlite => {
            let dir = std::env::var_os("BENCH_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(std::env::temp_dir)
                .join(format!("scheduler-bench-quickstart-{i}"));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            cmd.env(
                "DATABASE_URL",
                format!("sqlite://{}", dir.join("quickstart.db").display()),
            );
        }
        Backend::Postgres => {
            let url = database_url();
            let schema = format!("bench_quickstart_{i}");
            let admin = sqlx::PgPool::connect(&url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA IF EXISTS {schema} CASCADE"
            )))
            .execute(&admin)
            .await
            .unwrap();
            admin.close().await;
            cmd.env("DATABASE_URL", url).env("SCHEDULER_SCHEMA", schema);
        }
    }
    // A random phase against the whole second the first run waits for.
    tokio::time::sleep(random_delay(Duration::from_secs(1))).await;
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn the quickstart example");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, String)>();
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    for reader in [
        Box::new(out) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box::new(err),
    ] {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(reader).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = tx.send((Instant::now(), line));
            }
        });
    }
    drop(tx);
    let mut ready = None;
    let deadline = tokio::time::sleep(Duration::from_secs(60));
    tokio::pin!(deadline);
    let (first, first_wall) = loop {
        tokio::select! {
            line = rx.recv() => {
                let Some((at, line)) = line else { panic!("the quickstart exited before its first run") };
                if line.contains("scheduler running") {
                    ready = Some(at);
                }
                if line.contains("synced the advertiser report") {
                    break (at, chrono::Utc::now());
                }
            }
            _ = &mut deadline => panic!("no first run within 60 s"),
        }
    };
    let _ = child.kill().await;
    let ms = |t: Instant| (t - start).as_secs_f64() * 1000.0;
    // The task runs every whole second and starts well within one: its tick is the second.
    let tick = first_wall.timestamp_micros() / 1_000_000 * 1_000_000;
    let lag = (first_wall.timestamp_micros() - tick) as f64 / 1000.0;
    (
        ms(ready.expect("a `scheduler running` line")),
        ms(first),
        lag,
    )
}

#[tokio::main]
async fn main() {
    let bin = std::env::var("QUICKSTART_BIN").expect(
        "QUICKSTART_BIN is not set: run with scripts/bench quickstart_startup (it builds the example)",
    );
    let rounds: usize = std::env::var("QUICKSTART_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7);
    let dir = std::env::temp_dir().join(format!("scheduler-bench-qs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("quickstart.json");
    std::fs::write(
        &config,
        r#"{"tasks": [{"name": "syncAdvertiserReport", "enabled": true, "cron": "* * * * * *"}]}"#,
    )
    .unwrap();
    println!(
        "| store | rounds | spawn -> ready p50 ms | max ms | first run after its tick p50 ms | max ms | spawn -> first run p50 ms | max ms | load (1/5/15 min) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for backend in backends() {
        let (mut ready, mut first, mut lag) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..rounds {
            let (r, f, l) = round(&bin, backend, &config, i).await;
            ready.push(r);
            first.push(f);
            lag.push(l);
        }
        let label = match backend {
            Backend::Sqlite => "SQLite file (no server)",
            Backend::Postgres => "PostgreSQL, server already running",
        };
        println!(
            "| {label} | {rounds} | {:.0} | {:.0} | {:.1} | {:.1} | {:.0} | {:.0} | {} |",
            percentile(&mut ready, 50.0),
            percentile(&mut ready, 100.0),
            percentile(&mut lag, 50.0),
            percentile(&mut lag, 100.0),
            percentile(&mut first, 50.0),
            percentile(&mut first, 100.0),
            load_average(),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
