//! A scheduler node in its own process, for tests that kill it (`kill -9`). Configured entirely
//! through the environment, like any application built on `scheduler::run()`.
//!
//! The `iso.*` tasks run with `isolation = "process"`: the isolation tests start this binary as
//! an isolated run's child and judge each ending. Their handlers record what they did in files
//! under [`scheduler_tests::isolation_record_dir`] (their own record, not the node's).

use std::time::Duration;

use scheduler::{TaskContext, task};
use scheduler_tests::isolation_record_dir;

type HandlerResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Runs until killed.
#[task(name = "kill.slow")]
async fn kill_slow(ctx: TaskContext) {
    tracing::info!(run_id = ctx.run_id(), "victim started the slow task");
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// Runs until killed; at most once per tick (a run whose outcome is unknown is not rerun).
#[task(name = "kill.never", recovery = "never")]
async fn kill_never(ctx: TaskContext) {
    tracing::info!(
        run_id = ctx.run_id(),
        "victim started the at-most-once task"
    );
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// Holds the limit `kill-db` (shared by tasks) until killed.
#[task(name = "limit.kill.hold", limit = "kill-db")]
async fn limit_kill_hold(ctx: TaskContext) {
    tracing::info!(run_id = ctx.run_id(), "victim holds kill-db");
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// Writes one line of a sharded run's own record, `<kind> <tick ms> <index> <total> <node>
/// <run id>`, to `$SHARD_RECORD_DIR/<node>-<pid>.log` (appended and flushed at once, so a
/// process killed mid-run leaves every line it wrote). Nothing without the variable.
fn shard_record(ctx: &TaskContext, kind: &str) {
    use std::io::Write;
    let Ok(dir) = std::env::var("SHARD_RECORD_DIR") else {
        return;
    };
    let scheduler::Shard { index, total } = ctx.shard();
    let path =
        std::path::Path::new(&dir).join(format!("{}-{}.log", ctx.node_id(), std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open the shard record");
    // One `write` per line: `writeln!` on a `File` writes piece by piece, and handlers of the
    // same process running at once would interleave their pieces.
    let line = format!(
        "{kind} {} {index} {total} {} {}\n",
        ctx.scheduled_at().timestamp_millis(),
        ctx.node_id(),
        ctx.run_id()
    );
    file.write_all(line.as_bytes())
        .expect("write the shard record");
}

/// A sharded task (3 shards unless the config says otherwise): records its start, works for
/// `$SHARD_SLEEP_MS` (default 300 ms), records its end.
#[task(name = "shard.work", shards = 3)]
async fn shard_work(ctx: TaskContext) {
    shard_record(&ctx, "start");
    let ms = std::env::var("SHARD_SLEEP_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    shard_record(&ctx, "end");
}

/// `shard.work` at most once per shard: a shard's run lost with its node is not rerun.
#[task(name = "shard.never", shards = 3, recovery = "never")]
async fn shard_never(ctx: TaskContext) {
    shard_work(ctx).await;
}

/// A broadcast task (`shards = "nodes"`): writes `<kind> <tick ms> <index> <total> <node> <run
/// id> <broadcast?>` lines to `$BROADCAST_RECORD_DIR/<node>-<pid>.log` at its start and end
/// (appended and flushed at once), working for `$BROADCAST_SLEEP_MS` (default 200 ms) between.
#[task(name = "bcast.work", shards = "nodes")]
async fn bcast_work(ctx: TaskContext) {
    let write = |kind: &str| {
        use std::io::Write;
        let Ok(dir) = std::env::var("BROADCAST_RECORD_DIR") else {
            return;
        };
        let scheduler::Shard { index, total } = ctx.shard();
        let path = std::path::Path::new(&dir).join(format!(
            "{}-{}.log",
            ctx.node_id(),
            std::process::id()
        ));
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open the broadcast record");
        // One `write` per line (see `shard_record`).
        let line = format!(
            "{kind} {} {index} {total} {} {} {}\n",
            ctx.scheduled_at().timestamp_millis(),
            ctx.node_id(),
            ctx.run_id(),
            ctx.is_broadcast()
        );
        file.write_all(line.as_bytes())
            .expect("write the broadcast record");
    };
    write("start");
    let ms = std::env::var("BROADCAST_SLEEP_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    write("end");
}

/// Writes `value` as this run's record `key`.
fn record(ctx: &TaskContext, key: &str, value: impl std::fmt::Display) {
    let dir = isolation_record_dir(ctx.run_id());
    std::fs::create_dir_all(&dir).expect("create the record directory");
    let path = dir.join(key);
    std::fs::write(path.with_extension("tmp"), value.to_string()).expect("write a record");
    std::fs::rename(path.with_extension("tmp"), path).expect("publish a record");
}

/// Records who it is, logs through tracing and prints to stdout and stderr, succeeds.
#[task(name = "iso.ok", isolation = "process")]
async fn iso_ok(ctx: TaskContext) -> HandlerResult {
    record(&ctx, "pid", std::process::id());
    record(
        &ctx,
        "identity",
        format!(
            "{} {} {} {}",
            ctx.task_name(),
            ctx.run_id(),
            ctx.scheduled_at().to_rfc3339(),
            ctx.node_id()
        ),
    );
    // An instance's run: its key and arguments, as the handler reads them; the task's own run
    // reads arguments only as a manual run's override.
    let args = ctx.args::<Option<std::collections::BTreeMap<String, u64>>>()?;
    match (ctx.key(), args) {
        (Some(key), args) => record(
            &ctx,
            "instance",
            format!("{key} {:?}", args.unwrap_or_default()),
        ),
        (None, Some(args)) => record(&ctx, "args", format!("{args:?}")),
        (None, None) => {}
    }
    tracing::info!(answer = 42, "hello from the isolated handler");
    tracing::debug!("not at the default level");
    tracing::warn!(target: "app::sync", "a warning with a target");
    println!("to stdout");
    eprintln!("to stderr");
    Ok(())
}

/// Returns an error with a cause.
#[task(name = "iso.error", isolation = "process")]
async fn iso_error() -> HandlerResult {
    let cause = std::io::Error::other("connection refused");
    Err(Box::new(UpstreamError(cause)))
}

#[derive(Debug)]
struct UpstreamError(std::io::Error);

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the upstream said no")
    }
}

impl std::error::Error for UpstreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Panics.
#[task(name = "iso.panic", isolation = "process")]
async fn iso_panic() {
    panic!("the handler exploded on purpose");
}

/// Aborts the process.
#[task(name = "iso.abort", isolation = "process")]
async fn iso_abort() {
    std::process::abort();
}

/// Dies of a segmentation fault: writes to an address no process maps. (`raise(SIGSEGV)` would
/// not do: Rust's own SIGSEGV handler, there to report stack overflows, returns from a signal
/// that no faulting instruction caused.)
#[task(name = "iso.segfault", isolation = "process")]
async fn iso_segfault() {
    let unmapped = std::ptr::without_provenance_mut::<u8>(8);
    // SAFETY: none; the crash is this handler's purpose (Linux never maps the first page).
    unsafe { unmapped.write_volatile(1) };
}

/// Exits the process itself, before the handler returns.
#[task(name = "iso.exit", isolation = "process")]
async fn iso_exit() {
    std::process::exit(3);
}

/// Leaks memory, 16 MiB at a time (every page touched), past its limit; gives up at 1 GiB (on a
/// shared machine, a limit that does not hold must not take all of its memory).
#[task(name = "iso.leak", isolation = "process", memory_limit = "256MiB")]
async fn iso_leak(ctx: TaskContext) -> HandlerResult {
    record(&ctx, "pid", std::process::id());
    let mut leaked = Vec::new();
    for _ in 0..64 {
        leaked.push(vec![1_u8; 16 << 20]);
        std::hint::black_box(&leaked);
    }
    Err("the memory limit did not hold: 1 GiB allocated".into())
}

/// Spins on the CPU forever without an `.await`: it cannot see a request to stop.
#[task(name = "iso.spin", isolation = "process")]
async fn iso_spin(ctx: TaskContext) {
    record(&ctx, "pid", std::process::id());
    loop {
        std::hint::spin_loop();
    }
}

/// Ignores SIGTERM at the process level, then sleeps: only SIGKILL ends it.
#[task(name = "iso.ignore_term", isolation = "process")]
async fn iso_ignore_term(ctx: TaskContext) {
    // SAFETY: setting a signal's disposition to "ignore" is sound.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
    record(&ctx, "pid", std::process::id());
    record(&ctx, "ignoring", "SIGTERM");
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// Waits to be asked to stop, records it, and says it did not finish.
#[task(name = "iso.cooperative", isolation = "process")]
async fn iso_cooperative(ctx: TaskContext) -> HandlerResult {
    record(&ctx, "pid", std::process::id());
    ctx.cancelled().await;
    record(&ctx, "cancelled", "yes");
    Err(ctx.interrupted().into())
}

/// Starts a process of its own (which inherits its stdout and stderr), records its pid, and
/// waits forever.
#[task(name = "iso.grandchild", isolation = "process")]
async fn iso_grandchild(ctx: TaskContext) -> HandlerResult {
    let grandchild = std::process::Command::new("sleep").arg("3600").spawn()?;
    record(&ctx, "grandchild", grandchild.id());
    record(&ctx, "pid", std::process::id());
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(())
}

/// Starts a process of its own that keeps its stdout open, and returns at once.
#[task(name = "iso.leave_behind", isolation = "process")]
async fn iso_leave_behind(ctx: TaskContext) -> HandlerResult {
    let grandchild = std::process::Command::new("sleep").arg("3600").spawn()?;
    record(&ctx, "grandchild", grandchild.id());
    println!("before returning");
    Ok(())
}

/// Runs this binary again as a command of its own (it inherits the child's environment, but it
/// is not an isolated run's child), and records what it printed.
#[task(name = "iso.reexec", isolation = "process")]
async fn iso_reexec(ctx: TaskContext) -> HandlerResult {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args(["next", "0 9 * * *"])
        .output()?;
    record(
        &ctx,
        "reexec",
        format!("{}\n{}", out.status, String::from_utf8_lossy(&out.stdout)),
    );
    Ok(())
}

/// Writes far more than a run's log keeps: tracing events, stdout lines, one huge line.
#[task(name = "iso.flood", isolation = "process")]
async fn iso_flood() {
    for i in 0..2_000 {
        tracing::info!(i, "tracing line");
        println!("stdout line {i}");
    }
    println!("{}", "x".repeat(200 * 1024));
}

/// Asks for shared state, which an isolated handler does not have.
#[task(name = "iso.state", isolation = "process")]
async fn iso_state(ctx: TaskContext) -> HandlerResult {
    ctx.state::<String>()?;
    Ok(())
}

/// Writes `text` to `dir/name` at once (a reader never sees half of it).
fn publish(dir: &std::path::Path, name: &str, text: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, dir.join(name))
}

/// What an isolated handler of a node sees: records its environment and its limits
/// (`/proc/self/limits`) under `$ISO_RECORD_DIR` (a variable of the application's own), starts
/// a process that would sleep for an hour, records its pid, and returns at once.
#[task(
    name = "iso.environment",
    isolation = "process",
    max_processes = 4096,
    cpu_limit = "1h",
    max_file_size = "1GiB"
)]
async fn iso_environment(ctx: TaskContext) -> HandlerResult {
    let dir = std::path::PathBuf::from(std::env::var("ISO_RECORD_DIR")?);
    let run = ctx.run_id();
    let grandchild = std::process::Command::new("sleep").arg("3600").spawn()?;
    let env: String = std::env::vars_os()
        .map(|(k, v)| format!("{}={}\n", k.to_string_lossy(), v.to_string_lossy()))
        .collect();
    publish(
        &dir,
        &format!("limits-{run}"),
        &std::fs::read_to_string("/proc/self/limits")?,
    )?;
    publish(
        &dir,
        &format!("grandchild-{run}"),
        &grandchild.id().to_string(),
    )?;
    publish(&dir, &format!("env-{run}"), &env)?;
    Ok(())
}

/// Records its limits (`/proc/self/limits`) and succeeds.
#[task(name = "iso.limits", isolation = "process")]
async fn iso_limits(ctx: TaskContext) -> HandlerResult {
    record(
        &ctx,
        "limits",
        std::fs::read_to_string("/proc/self/limits")?,
    );
    Ok(())
}

/// Starts a process that ignores SIGTERM (as a shell's `trap "" TERM` leaves it) and records its
/// pid, then waits to be asked to stop and returns, leaving it behind.
#[task(name = "iso.stubborn_grandchild", isolation = "process")]
async fn iso_stubborn_grandchild(ctx: TaskContext) -> HandlerResult {
    let grandchild = std::process::Command::new("sh")
        .args(["-c", "trap '' TERM; exec sleep 3600"])
        .spawn()?;
    record(&ctx, "grandchild", grandchild.id());
    record(&ctx, "pid", std::process::id());
    ctx.cancelled().await;
    Err(ctx.interrupted().into())
}

#[tokio::main]
async fn main() -> scheduler::Result<()> {
    scheduler::run().await
}
