//! One scheduler node for the fault-injection harness, configured entirely by the environment
//! (`SCHEDULER_*`, see `scheduler::SchedulerBuilder::from_env`) plus `FAULT_RECORD_DIR`.
//!
//! Every handler appends what it does to this process's record file,
//! `$FAULT_RECORD_DIR/<node_id>-<pid>.jsonl`: `start`, `beat` (long handlers), and `end` with
//! `ok` and `cancelled`. The end line is written explicitly just before returning, never from a
//! drop guard: a handler the engine stops (aborts) must leave no `end` behind.

use std::time::Duration;

use chrono::Utc;
use scheduler::{TaskContext, task};
use scheduler_faults::record::{Ev, Record, RecordWriter, record_path};
use tokio::time::{Instant, sleep};

/// This process's record file, shared with every handler as state.
struct Recorder {
    writer: RecordWriter,
    pid: u32,
}

impl Recorder {
    fn from_env() -> Result<Self, String> {
        let dir = std::env::var_os("FAULT_RECORD_DIR")
            .ok_or("FAULT_RECORD_DIR is not set: fault_node is started by the `faults` harness")?;
        let node = std::env::var("SCHEDULER_NODE_ID")
            .map_err(|_| "SCHEDULER_NODE_ID is not set: the record file is named after it")?;
        let pid = std::process::id();
        let path = record_path(std::path::Path::new(&dir), &node, pid);
        let writer = RecordWriter::open(&path)
            .map_err(|e| format!("cannot open the record file {}: {e}", path.display()))?;
        Ok(Self { writer, pid })
    }

    fn write(&self, ctx: &TaskContext, ev: Ev, ok: Option<bool>, cancelled: Option<bool>) {
        // An instance's runs are judged as its own schedule: by its row's name, `task/key`.
        let task = match ctx.key() {
            Some(key) => format!("{}/{key}", ctx.task_name()),
            None => ctx.task_name().to_owned(),
        };
        let record = Record {
            ev,
            task,
            tick: ctx.scheduled_at(),
            run_id: ctx.run_id(),
            node: ctx.node_id().to_owned(),
            pid: self.pid,
            t_ms: Utc::now().timestamp_millis(),
            ok,
            cancelled,
        };
        if let Err(e) = self.writer.append(&record) {
            tracing::error!(error = %e, "cannot append to the record file");
        }
    }

    fn start(&self, ctx: &TaskContext) {
        self.write(ctx, Ev::Start, None, None);
    }

    fn beat(&self, ctx: &TaskContext) {
        self.write(ctx, Ev::Beat, None, None);
    }

    fn end(&self, ctx: &TaskContext, ok: bool, cancelled: bool) {
        self.write(ctx, Ev::End, Some(ok), Some(cancelled));
    }
}

/// The handler was told to stop before it had finished.
#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted before finishing")
    }
}

impl std::error::Error for Interrupted {}

type Outcome = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn recorder(ctx: &TaskContext) -> Result<&Recorder, Box<dyn std::error::Error + Send + Sync>> {
    match ctx.state::<Recorder>() {
        Ok(recorder) => Ok(recorder),
        // An isolated run's child process holds no shared state: it writes a record file of
        // its own (named by its own pid) from the same environment.
        Err(missing) => {
            static CHILD: std::sync::OnceLock<Result<Recorder, String>> =
                std::sync::OnceLock::new();
            CHILD
                .get_or_init(Recorder::from_env)
                .as_ref()
                .map_err(|e| format!("{missing}; and no record file of its own: {e}").into())
        }
    }
}

/// 50 to 150 ms, spread by run id (no randomness needed: runs differ).
fn quick_work(run_id: i64) -> Duration {
    let mut x = (run_id as u64) ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    Duration::from_millis(50 + x % 101)
}

/// A quick, cooperative handler: works 50 to 150 ms unless told to stop.
async fn quick(ctx: TaskContext) -> Outcome {
    let rec = recorder(&ctx)?;
    rec.start(&ctx);
    tokio::select! {
        _ = sleep(quick_work(ctx.run_id())) => {
            rec.end(&ctx, true, false);
            Ok(())
        }
        _ = ctx.cancelled() => {
            rec.end(&ctx, false, true);
            Err(Interrupted.into())
        }
    }
}

macro_rules! quick_tasks {
    ($($f:ident = $name:literal),* $(,)?) => {
        $(
            #[task(name = $name)]
            async fn $f(ctx: TaskContext) -> Outcome {
                quick(ctx).await
            }
        )*
    };
}

quick_tasks! {
    tick_00 = "f.tick.00", tick_01 = "f.tick.01", tick_02 = "f.tick.02", tick_03 = "f.tick.03",
    tick_04 = "f.tick.04", tick_05 = "f.tick.05", tick_06 = "f.tick.06", tick_07 = "f.tick.07",
    tick_08 = "f.tick.08", tick_09 = "f.tick.09", tick_10 = "f.tick.10", tick_11 = "f.tick.11",
    tick_12 = "f.tick.12", tick_13 = "f.tick.13", tick_14 = "f.tick.14", tick_15 = "f.tick.15",
    tick_16 = "f.tick.16", tick_17 = "f.tick.17", tick_18 = "f.tick.18", tick_19 = "f.tick.19",
    tick_20 = "f.tick.20", tick_21 = "f.tick.21", tick_22 = "f.tick.22", tick_23 = "f.tick.23",
    tick_24 = "f.tick.24", tick_25 = "f.tick.25", tick_26 = "f.tick.26", tick_27 = "f.tick.27",
    tick_28 = "f.tick.28", tick_29 = "f.tick.29", tick_30 = "f.tick.30", tick_31 = "f.tick.31",
    tick_32 = "f.tick.32", tick_33 = "f.tick.33", tick_34 = "f.tick.34", tick_35 = "f.tick.35",
    tick_36 = "f.tick.36", tick_37 = "f.tick.37", tick_38 = "f.tick.38", tick_39 = "f.tick.39",
    tick_40 = "f.tick.40", tick_41 = "f.tick.41", tick_42 = "f.tick.42", tick_43 = "f.tick.43",
    tick_44 = "f.tick.44", tick_45 = "f.tick.45", tick_46 = "f.tick.46", tick_47 = "f.tick.47",
    tick_48 = "f.tick.48", tick_49 = "f.tick.49",
}

/// The task whose instances the `instances` scenario makes and removes while nodes die.
#[task(name = "f.inst")]
async fn inst(ctx: TaskContext) -> Outcome {
    quick(ctx).await
}

/// Works 1 s, then succeeds: the harness stops the database while its outcome is being written.
#[task(name = "f.finish")]
async fn finish(ctx: TaskContext) -> Outcome {
    let rec = recorder(&ctx)?;
    rec.start(&ctx);
    tokio::select! {
        _ = sleep(Duration::from_secs(1)) => {
            rec.end(&ctx, true, false);
            Ok(())
        }
        _ = ctx.cancelled() => {
            rec.end(&ctx, false, true);
            Err(Interrupted.into())
        }
    }
}

/// Works 6 s in 100 ms steps, a beat per step; stops (and fails) when told to.
#[task(name = "f.slow")]
async fn slow(ctx: TaskContext) -> Outcome {
    let rec = recorder(&ctx)?;
    rec.start(&ctx);
    for _ in 0..60 {
        tokio::select! {
            _ = sleep(Duration::from_millis(100)) => rec.beat(&ctx),
            _ = ctx.cancelled() => {
                rec.end(&ctx, false, true);
                return Err(Interrupted.into());
            }
        }
    }
    rec.end(&ctx, true, false);
    Ok(())
}

/// Ignores cancellation: beats every 100 ms for 8 s of wall time, then succeeds. Only the
/// engine aborting it (at an `.await`) stops it early, and then it writes no end.
#[task(name = "f.stubborn")]
async fn stubborn(ctx: TaskContext) -> Outcome {
    let rec = recorder(&ctx)?;
    rec.start(&ctx);
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(8) {
        sleep(Duration::from_millis(100)).await;
        rec.beat(&ctx);
    }
    rec.end(&ctx, true, false);
    Ok(())
}

/// Holds its thread without an `.await` for 5 s, beating every 100 ms (a synchronous client, a
/// `std::thread::sleep`): the engine cannot stop it, only keep its lock.
fn block(ctx: &TaskContext) -> Outcome {
    let rec = recorder(ctx)?;
    rec.start(ctx);
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        rec.beat(ctx);
    }
    rec.end(ctx, true, false);
    Ok(())
}

/// Spins on the CPU for 5 s without an `.await`, beating every 100 ms.
fn spin(ctx: &TaskContext) -> Outcome {
    let rec = recorder(ctx)?;
    rec.start(ctx);
    let began = std::time::Instant::now();
    let mut next_beat = Duration::from_millis(100);
    let mut x = 0u64;
    while began.elapsed() < Duration::from_secs(5) {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
        }
        if began.elapsed() >= next_beat {
            rec.beat(ctx);
            next_beat += Duration::from_millis(100);
        }
    }
    rec.end(ctx, true, false);
    Ok(())
}

macro_rules! misbehaving_tasks {
    ($($f:ident = $name:literal => $body:ident),* $(,)?) => {
        $(
            #[task(name = $name)]
            async fn $f(ctx: TaskContext) -> Outcome {
                $body(&ctx)
            }
        )*
    };
}

/// The same misbehaviour in a child process of its own (`isolation = "process"`).
macro_rules! isolated_misbehaving_tasks {
    ($($f:ident = $name:literal => $body:ident),* $(,)?) => {
        $(
            #[task(name = $name, isolation = "process")]
            async fn $f(ctx: TaskContext) -> Outcome {
                $body(&ctx)
            }
        )*
    };
}

isolated_misbehaving_tasks! {
    iso_block = "f.iso.block" => block, iso_spin = "f.iso.spin" => spin,
}

misbehaving_tasks! {
    block_0 = "f.block.0" => block, block_1 = "f.block.1" => block,
    block_2 = "f.block.2" => block, block_3 = "f.block.3" => block,
    spin_0 = "f.spin.0" => spin, spin_1 = "f.spin.1" => spin, spin_2 = "f.spin.2" => spin,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    scheduler::init_tracing();
    // An isolated run's child runs its one handler and builds no node (it has no database URL:
    // the node keeps its secrets), as `scheduler::child_request` documents.
    if let Some(request) = scheduler::child_request() {
        scheduler::run_child(request).await;
    }
    let recorder = Recorder::from_env()?;
    scheduler::SchedulerBuilder::from_env()?
        .state(recorder)
        .build()?
        .run_until(scheduler::shutdown_signal())
        .await?;
    Ok(())
}
