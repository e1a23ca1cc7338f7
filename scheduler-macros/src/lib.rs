//! The `#[task]` attribute of the `scheduler` crate. Use it through `scheduler::task`.
//!
//! This file only wires the three passes together; each owns one concern:
//!
//! - `ast` parses the attribute arguments into a typed view that keeps the syn nodes for spans;
//! - `valid` checks the arguments and the function signature, collecting every error at once;
//! - `expand` turns a validated task into the generated registration code.
//!
//! When anything fails, the user's item is emitted unchanged next to the `compile_error!`s, so
//! one mistake does not cascade into "cannot find function" errors at every call site.

#![warn(missing_docs)]

mod ast;
mod expand;
mod valid;

use proc_macro::TokenStream;

/// Registers an `async fn` as a scheduler task.
///
/// ```ignore
/// use scheduler::{task, TaskContext};
///
/// #[task(name = "syncAdvertiserReport")]
/// async fn sync_advertiser_report(ctx: TaskContext) -> anyhow::Result<()> {
///     Ok(())
/// }
///
/// #[task(
///     name = "sendPayouts",
///     timeout = "30m",
///     retries = 3,
///     backoff = "30s",
///     misfire = "skip",
///     lock_lifetime = "2m",
///     recovery = "never",
/// )]
/// async fn send_payouts() -> anyhow::Result<()> {
///     Ok(())
/// }
///
/// #[task(name = "parseUploads", isolation = "process", memory_limit = "512MiB")]
/// async fn parse_uploads() -> anyhow::Result<()> {
///     Ok(())
/// }
/// ```
///
/// Options, each at most once, in any order:
///
/// - `name = "..."` (required): the stable task name stored in the database and used in config;
///   1 to 128 ASCII letters, digits, `_`, `.`, `:` or `-`.
/// - `crate = path`: where the `scheduler` crate is, for a renamed dependency (default
///   `::scheduler`).
///
/// Policy options. Each one left out takes the scheduler's default for all tasks (from its
/// builder or the environment); the registered `TaskOptions` keeps it `None`. Durations are
/// strings in humantime syntax (`"500ms"`, `"30s"`, `"5m"`, `"1h30m"`, `"1h 30m"`), parsed and
/// checked at compile time.
///
/// - `timeout = "30m"`: how long one run may take before it is cancelled and counted as failed;
///   at least 1ms.
/// - `retries = 3`: how many times a failed run is retried for the same tick, on top of the
///   first attempt; an integer from 0 to 100.
/// - `backoff = "30s"`: how long to wait after a failed attempt before retrying; at least 1ms.
/// - `misfire = "once" | "skip"`: what to do with ticks missed while no node could run the
///   task: `"once"` runs once for all of them as soon as a node can, `"skip"` waits for the
///   next tick on the schedule.
/// - `lock_lifetime = "2m"`: how long a run's lock outlives its node's last renewal, i.e. how
///   soon a run whose node went silent is taken for lost; at least 1s.
/// - `recovery = "rerun" | "never"`: what to do with a run whose outcome is unknown because its
///   node crashed or lost its lock mid-run: `"rerun"` runs the tick again (at-least-once),
///   `"never"` records the run as `lost`, raises an alert and never re-runs it (at-most-once).
/// - `shards = 8`: each tick is split into this many runs, each claimed, locked, renewed,
///   retried and recorded on its own and spread over the live nodes; the handler reads its
///   shard with `ctx.shard()` (`index` of `total`). An integer from 1 to 1000; the config
///   document's `shards:` overrides it. See `scheduler::Shard`.
/// - `shards = "nodes"`: a broadcast: each tick runs once on every node alive at the tick
///   (`ctx.shard()` is the node's position among them, `ctx.is_broadcast()` is true); a run is
///   its node's own and is never run by another node. See `scheduler::Shard`.
/// - `jitter = "30s"`: each tick starts at a fixed offset within this window after it (the
///   offset given by the task, an instance's key and the tick, the same on every node), so that
///   many tasks or instances on one schedule do not all start in the same second; the run still
///   serves its tick (`ctx.scheduled_at()`). From `0s` to `1day`; the config document's
///   `jitter` overrides it, an instance's own overrides both.
/// - `limit = "warehouse-db"`: its runs hold a share of this limit, declared with its size in
///   the config document's `limits` (`limits: {warehouse-db: 2}`): at most that many runs of
///   all the tasks naming it run at once across the nodes; a tick waits for a share. The
///   config entry's `limit` overrides it. See `docs/shared-limits.md`.
///
/// Isolation options:
///
/// - `isolation = "in-process" | "process"`: where the handler runs. `"in-process"` (the
///   default) runs it in the node's process. `"process"` runs each run in a child process of the
///   same binary, so a segfault, abort, panic, leak or endless loop ends that child and not the
///   node; the run is recorded with what happened (signal name, exit code). A child runs `main`
///   again up to `scheduler::run()` (keep what comes before it cheap), and shared state
///   (`ctx.state()`) is not available in it: build what the handler needs inside the handler.
///   See `scheduler::policy`, "Isolation".
/// - `memory_limit = "512MiB"` (only with `isolation = "process"`): the most memory the task's
///   child process may allocate (heap and private writable mappings, thread stacks included);
///   past it allocations fail and the run is recorded as out of memory. An integer and a unit: `B`, `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024) or `KB`,
///   `MB`, `GB`, `TB` (powers of 1000); at least 64 MiB. Enforced on Linux.
/// - `max_processes = 64` (only with `isolation = "process"`): the most processes *and threads*
///   the node's user may have when the task's process starts one (`RLIMIT_NPROC`: it counts all
///   of that user's processes, the node's threads included, not only the task's; a user at or
///   past it cannot even start the task's process). From 16 to 4194304. Not enforced with
///   `CAP_SYS_RESOURCE`.
/// - `cpu_limit = "10m"` (only with `isolation = "process"`): the CPU time the task's process
///   may use, in whole seconds from `1s` to `1year` (`RLIMIT_CPU`); past it the process is
///   killed by SIGXCPU and the run recorded as such. CPU time, not wall time: see `timeout`.
/// - `max_file_size = "1GiB"` (only with `isolation = "process"`): the largest file the task's
///   process (and what it starts) may write (`RLIMIT_FSIZE`); writing past it kills the process
///   by SIGXFSZ. Written like `memory_limit`, from 1 KiB to 1024 TiB.
///
/// Processes a task's handler starts are killed when its run ends, however it ends; its
/// environment lacks the node's secrets (see `docs/isolation.md`).
///
/// The function takes no parameter or one `TaskContext`, and returns `()` or `Result<(), E>`
/// for any `E` that converts into `Box<dyn std::error::Error + Send + Sync>`. Its future must
/// be `Send + 'static`. It must be a free function (in a module or a block): a registration
/// cannot be emitted inside an `impl` block.
#[proc_macro_attribute]
pub fn task(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    let args = ast::TaskArgs::parse(args.into());
    match valid::validate(args, item.clone()) {
        Ok(task) => expand::expand(&task).into(),
        Err(errors) => {
            let mut out = item;
            out.extend(errors.into_compile_error());
            out.into()
        }
    }
}
