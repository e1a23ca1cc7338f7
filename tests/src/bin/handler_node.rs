//! A scheduler node whose handlers misbehave the way user code does: they block their thread
//! (`std::thread::sleep`, a synchronous client), spin on the CPU, ignore cancellation, or never
//! return. Configured through the environment like any `scheduler::run()` application; every
//! handler records what it did in `$HANDLER_RECORDS` (see `scheduler_tests::handler_records`),
//! which is what the tests judge.
//!
//! `HANDLER_BLOCK_MS` and `HANDLER_SPIN_MS` set how long the blocking and spinning handlers hold
//! their thread (3 s each by default).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use scheduler::{TaskContext, task};
use scheduler_tests::handler_records::{Kind, RecordWriter};

const BEAT: Duration = Duration::from_millis(100);
const FOREVER: Duration = Duration::from_secs(3600);

fn writer(node: &str) -> &'static RecordWriter {
    static WRITER: OnceLock<RecordWriter> = OnceLock::new();
    WRITER.get_or_init(|| {
        let dir = std::env::var_os("HANDLER_RECORDS")
            .map(PathBuf::from)
            .expect("HANDLER_RECORDS names the records directory");
        RecordWriter::open(&dir, node).expect("open the records file")
    })
}

/// One run's record lines.
struct Run {
    task: String,
    tick: String,
    run_id: i64,
    node: String,
    fence: u64,
}

impl Run {
    fn start(ctx: &TaskContext) -> Self {
        let run = Run {
            task: ctx.task_name().to_owned(),
            tick: ctx.scheduled_at().to_rfc3339(),
            run_id: ctx.run_id(),
            node: ctx.node_id().to_owned(),
            fence: ctx.fencing_token(),
        };
        run.write(Kind::Start);
        run
    }

    fn write(&self, kind: Kind) {
        writer(&self.node).write(
            kind,
            &self.task,
            &self.tick,
            self.run_id,
            &self.node,
            self.fence,
        );
    }
}

fn millis(var: &str, default: u64) -> Duration {
    Duration::from_millis(
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// Holds its thread for `total` without an `.await`, beating as it goes.
fn block(ctx: &TaskContext, total: Duration) {
    let run = Run::start(ctx);
    let until = Instant::now() + total;
    while Instant::now() < until {
        std::thread::sleep(BEAT);
        run.write(Kind::Beat);
    }
    run.write(Kind::End);
}

/// Spins on the CPU for `total` without an `.await`, beating as it goes.
fn spin(ctx: &TaskContext, total: Duration) {
    let run = Run::start(ctx);
    let started = Instant::now();
    let mut next_beat = started + BEAT;
    let mut x = 0u64;
    while started.elapsed() < total {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
        }
        if Instant::now() >= next_beat {
            run.write(Kind::Beat);
            next_beat += BEAT;
        }
    }
    run.write(Kind::End);
}

/// Awaits for `total`, ignoring cancellation, beating as it goes.
async fn deaf(ctx: &TaskContext, total: Duration) {
    let run = Run::start(ctx);
    let until = Instant::now() + total;
    while Instant::now() < until {
        tokio::time::sleep(BEAT).await;
        run.write(Kind::Beat);
    }
    run.write(Kind::End);
}

macro_rules! blocking_tasks {
    ($($fn_name:ident = $name:literal),* $(,)?) => {$(
        #[task(name = $name)]
        async fn $fn_name(ctx: TaskContext) {
            block(&ctx, millis("HANDLER_BLOCK_MS", 3000));
        }
    )*};
}

macro_rules! spinning_tasks {
    ($($fn_name:ident = $name:literal),* $(,)?) => {$(
        #[task(name = $name)]
        async fn $fn_name(ctx: TaskContext) {
            spin(&ctx, millis("HANDLER_SPIN_MS", 3000));
        }
    )*};
}

blocking_tasks!(
    block_1 = "misbehave.block.1",
    block_2 = "misbehave.block.2",
    block_3 = "misbehave.block.3",
    block_4 = "misbehave.block.4",
);

spinning_tasks!(
    spin_1 = "misbehave.spin.1",
    spin_2 = "misbehave.spin.2",
    spin_3 = "misbehave.spin.3",
);

/// A quick task beside the misbehaving ones.
#[task(name = "misbehave.tick")]
async fn tick(ctx: TaskContext) {
    Run::start(&ctx).write(Kind::End);
}

/// Works `HANDLER_WORK_MS` (300 ms by default), awaiting, beating as it goes: a well-behaved task
/// whose runs last long enough for two at once to show.
#[task(name = "misbehave.steady")]
async fn steady(ctx: TaskContext) {
    deaf(&ctx, millis("HANDLER_WORK_MS", 300)).await;
}

/// Blocks its thread for an hour: never reaches an `.await` once started.
#[task(name = "misbehave.block_forever")]
async fn block_forever(ctx: TaskContext) {
    block(&ctx, FOREVER);
}

/// At most once per tick; awaits for an hour and ignores cancellation.
#[task(name = "misbehave.never", recovery = "never")]
async fn never(ctx: TaskContext) {
    deaf(&ctx, FOREVER).await;
}

/// At most once per tick; blocks its thread for an hour.
#[task(name = "misbehave.never_block", recovery = "never")]
async fn never_block(ctx: TaskContext) {
    block(&ctx, FOREVER);
}

/// At most once per tick, with a timeout and retries; ignores cancellation, so it is stopped by
/// force past its timeout.
#[task(
    name = "misbehave.never_timeout",
    recovery = "never",
    timeout = "1s",
    retries = 2,
    backoff = "1s"
)]
async fn never_timeout(ctx: TaskContext) {
    deaf(&ctx, FOREVER).await;
}

// Isolated tasks (`isolation = "process"`): each run in a child process of this binary.

/// Blocks its child's thread for an hour.
#[task(name = "misbehave.iso.block", isolation = "process")]
async fn iso_block(ctx: TaskContext) {
    block(&ctx, FOREVER);
}

/// Spins its child's CPU for an hour, past its 1-second timeout.
#[task(name = "misbehave.iso.spin", isolation = "process", timeout = "1s")]
async fn iso_spin(ctx: TaskContext) {
    spin(&ctx, FOREVER);
}

/// Crashes its child with a segmentation fault.
#[task(name = "misbehave.iso.segfault", isolation = "process")]
async fn iso_segfault(ctx: TaskContext) {
    let _run = Run::start(&ctx);
    // A real invalid access (raise(SIGSEGV) would meet std's guard-page handler, which returns).
    let unmapped = std::hint::black_box(8usize) as *mut u8;
    // SAFETY: none; it is meant to crash the process, which is the point of this task.
    unsafe { std::ptr::write_volatile(unmapped, 1) };
}

/// Aborts its child.
#[task(name = "misbehave.iso.abort", isolation = "process")]
async fn iso_abort(ctx: TaskContext) {
    let _run = Run::start(&ctx);
    std::process::abort();
}

/// Leaks memory until its child reaches its 128 MiB limit.
#[task(
    name = "misbehave.iso.leak",
    isolation = "process",
    memory_limit = "128MiB"
)]
async fn iso_leak(ctx: TaskContext) {
    let run = Run::start(&ctx);
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        kept.push(vec![1u8; 4 << 20]);
        if kept.len() > 1024 {
            // 4 GiB and no limit reached: say so rather than eat the machine.
            run.write(Kind::End);
            panic!("the memory limit was not enforced");
        }
    }
}

/// Writes to stdout, stderr and `tracing`, then returns `Ok`.
#[task(name = "misbehave.iso.log", isolation = "process")]
async fn iso_log(ctx: TaskContext) {
    let run = Run::start(&ctx);
    println!("isolated line on stdout");
    eprintln!("isolated line on stderr");
    tracing::info!(answer = 42, "isolated line from tracing");
    run.write(Kind::End);
}

/// At most once per tick; awaits for an hour in its child and ignores cancellation.
#[task(
    name = "misbehave.iso.never",
    isolation = "process",
    recovery = "never"
)]
async fn iso_never(ctx: TaskContext) {
    deaf(&ctx, FOREVER).await;
}

// Tasks an operator cancels (`tests/tests/it/cancel.rs`).

/// Works until told to stop (beating as it goes), then says it did not finish.
#[task(name = "misbehave.cooperative")]
async fn cooperative(ctx: TaskContext) -> Result<(), scheduler::Interrupted> {
    let run = Run::start(&ctx);
    loop {
        tokio::select! {
            () = ctx.cancelled() => {
                run.write(Kind::End);
                return Err(ctx.interrupted());
            }
            () = tokio::time::sleep(BEAT) => run.write(Kind::Beat),
        }
    }
}

/// Works until told to stop, then finishes its work and returns `Ok`.
#[task(name = "misbehave.finishes_anyway")]
async fn finishes_anyway(ctx: TaskContext) {
    let run = Run::start(&ctx);
    loop {
        tokio::select! {
            () = ctx.cancelled() => break,
            () = tokio::time::sleep(BEAT) => run.write(Kind::Beat),
        }
    }
    run.write(Kind::End);
}

/// Awaits for an hour and ignores cancellation (recovery = rerun).
#[task(name = "misbehave.deaf")]
async fn deaf_rerun(ctx: TaskContext) {
    deaf(&ctx, FOREVER).await;
}

/// In a child process of its own: awaits for an hour and ignores cancellation (SIGTERM).
#[task(name = "misbehave.iso.deaf", isolation = "process")]
async fn iso_deaf(ctx: TaskContext) {
    deaf(&ctx, FOREVER).await;
}

#[tokio::main]
async fn main() -> scheduler::Result<()> {
    scheduler::run().await
}
