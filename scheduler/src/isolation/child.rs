//! The child's side: recognise that this process is an isolated run's child, run that one
//! handler, report how it ended, exit.
//!
//! Nothing here reads the config, opens the store or starts a service of the node: the child
//! needs only the binary's task registry and the request in its environment.

use std::fmt;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use tokio_util::sync::CancellationToken;
use tracing::{Event, Instrument, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

use super::wire::{self, Record, Request};
use crate::TaskContext;
use crate::registry::TaskDescriptor;

/// The run an isolated child process serves, found in its environment by [`child_request`].
pub struct ChildRequest {
    request: Result<Request, String>,
}

impl fmt::Debug for ChildRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.request {
            Ok(request) => f
                .debug_struct("ChildRequest")
                .field("task", &request.task)
                .field("run_id", &request.run_id)
                .field("attempt", &request.attempt)
                .finish_non_exhaustive(),
            Err(error) => f.debug_tuple("ChildRequest").field(error).finish(),
        }
    }
}

impl ChildRequest {
    /// The name of the task to run (`None` if the request could not be read).
    pub fn task_name(&self) -> Option<&str> {
        self.request.as_ref().ok().map(|r| r.task.as_str())
    }

    /// The id of the run it serves (`None` if the request could not be read).
    pub fn run_id(&self) -> Option<i64> {
        self.request.as_ref().ok().map(|r| r.run_id)
    }
}

/// `Some` when this process is an isolated run's child, started by its node to run one handler:
/// then call [`run_child`] with it, and do nothing else.
///
/// `scheduler::run()` and [`SchedulerBuilder::build`](crate::SchedulerBuilder::build) do this
/// first thing (`build` runs the child's handler and exits before it opens a store or binds a
/// port), so applications need nothing more. An application whose `main` does costly work
/// before it builds its scheduler (every child runs `main` again) can ask first and skip that
/// work:
///
/// ```no_run
/// #[tokio::main]
/// async fn main() -> scheduler::Result<()> {
///     if let Some(request) = scheduler::child_request() {
///         scheduler::run_child(request).await;
///     }
///     // Start-up work a child does not need...
///     scheduler::run().await
/// }
/// ```
///
/// Cheap: it reads one environment variable. A process started from the same binary by a
/// handler inherits that variable, but its parent is not the node, so it is not a child: it
/// runs as the binary normally does.
pub fn child_request() -> Option<ChildRequest> {
    let raw = std::env::var_os(wire::REQUEST_VAR)?;
    let parsed = raw
        .to_str()
        .ok_or_else(|| "it is not UTF-8".to_owned())
        .and_then(|text| serde_json::from_str::<Request>(text).map_err(|e| e.to_string()))
        .and_then(|request| {
            if request.v == wire::VERSION {
                Ok(request)
            } else {
                Err(format!(
                    "protocol version {} (this binary speaks {})",
                    request.v,
                    wire::VERSION
                ))
            }
        });
    if let Ok(request) = &parsed
        && !is_parent(request.parent_pid)
    {
        return None;
    }
    Some(ChildRequest { request: parsed })
}

#[cfg(unix)]
fn is_parent(pid: u32) -> bool {
    std::os::unix::process::parent_id() == pid
}

#[cfg(not(unix))]
fn is_parent(_pid: u32) -> bool {
    // No node on this system starts children; a request here was inherited by mistake.
    false
}

/// In an isolated run's child, runs its handler and exits the process; elsewhere returns at
/// once. [`SchedulerBuilder::build`](crate::SchedulerBuilder::build) calls it first, so an
/// application that builds its scheduler itself never opens a store or binds the admin port in
/// a child (the node's admin address is in its environment, its database URL is not: the
/// default SQLite file's lock would let only one child run at a time).
///
/// `build` is not async: on a multi-threaded runtime the handler runs on it (the calling worker
/// gives up its other tasks meanwhile); on a current-thread runtime, or outside one, it runs on
/// a runtime of its own in a thread of its own, as the handler gets no shared state anyway.
pub(crate) fn serve_if_child() {
    let Some(request) = child_request() else {
        return;
    };
    use tokio::runtime::{Builder, Handle, RuntimeFlavor};
    if let Ok(handle) = Handle::try_current()
        && handle.runtime_flavor() == RuntimeFlavor::MultiThread
    {
        return tokio::task::block_in_place(move || handle.block_on(run_child(request)));
    }
    let served =
        std::thread::spawn(
            move || match Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime.block_on(run_child(request)),
                Err(error) => {
                    eprintln!("scheduler: an isolated run's child cannot start a runtime: {error}");
                    std::process::exit(wire::EXIT_NOT_STARTED)
                }
            },
        )
        .join();
    // `run_child` exits the process; only a panic outside the handler's own guard ends here.
    let _ = served;
    std::process::exit(wire::EXIT_NOT_STARTED)
}

/// Runs the handler `request` names, reports how it ended to the node and exits the process:
/// the whole life of an isolated run's child. Call it inside a tokio runtime (the application's
/// `#[tokio::main]`), with what [`child_request`] returned.
///
/// The handler gets a [`TaskContext`] with the run's identity, whose
/// [`cancelled`](TaskContext::cancelled) fires on SIGTERM, and no shared state. Its `tracing`
/// events (at the levels `RUST_LOG` enables, `info` by default) go to the node as the run's log,
/// unless `main` installed a subscriber of its own before (then they go where that one writes,
/// and reach the log only if it writes to stdout or stderr).
///
/// The exit code says how the handler ended: 0 returned `Ok`, 1 returned an error, 101
/// panicked, 2 could not be started; the node reads the detail (error text, panic message) from
/// the child's event socket.
pub async fn run_child(request: ChildRequest) -> ! {
    let code = serve(request).await;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(code)
}

async fn serve(request: ChildRequest) -> i32 {
    let request = match request.request {
        Ok(request) => request,
        Err(error) => {
            eprintln!(
                "scheduler: this process was started as an isolated run, but its request ({}) \
                 cannot be read: {error}",
                wire::REQUEST_VAR
            );
            return wire::EXIT_NOT_STARTED;
        }
    };
    // Listen for SIGTERM before anything else: until then it ends the process at once.
    let terminate = listen_for_terminate();
    let events = match Events::open(request.events_fd) {
        Ok(events) => events,
        Err(error) => {
            eprintln!(
                "scheduler: isolated run {} of `{}` cannot reach its node (fd {}): {error}",
                request.run_id, request.task, request.events_fd
            );
            return wire::EXIT_NOT_STARTED;
        }
    };
    install_tracing(&events);

    let cancel = CancellationToken::new();
    match terminate {
        Ok(mut signal) => {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                signal.recv().await;
                cancel.cancel();
            });
        }
        Err(error) => tracing::warn!(
            error = %error,
            "cannot listen for SIGTERM: the handler will not be asked to stop, only stopped"
        ),
    }

    // The request names the run's row: a shard's (`name[i]`) or an instance's (`name/key`) is
    // its task's.
    let task = crate::shard::split_row(&request.task).0;
    let Some(descriptor) = inventory::iter::<TaskDescriptor>
        .into_iter()
        .find(|descriptor| descriptor.name == task)
    else {
        events.send(&Record::NotStarted {
            reason: format!(
                "no task named `{}` is registered in this binary ({})",
                request.task,
                std::env::current_exe()
                    .map(|path| path.display().to_string())
                    .unwrap_or_else(|_| "unknown path".into())
            ),
        });
        return wire::EXIT_NOT_STARTED;
    };

    let shard = request
        .shard
        .map_or(crate::Shard::WHOLE, |[index, total]| crate::Shard {
            index,
            total,
        });
    let ctx = TaskContext::isolated(
        Arc::from(crate::shard::split_row(&request.task).0),
        request.run_id,
        request.scheduled_at,
        Arc::from(request.node_id.as_str()),
        cancel,
    )
    .with_fencing_token(request.fencing_token)
    .with_shard(shard)
    // A broadcast task's run is named by its node's row (`name[@node]`).
    .with_broadcast(crate::shard::row_node(&request.task).is_some());
    // An instance's run is named by its row (`task/key`); a manual run carries its override.
    let ctx = ctx.with_row_args(&request.task, request.args.clone());
    let span = tracing::info_span!(
        "task_run",
        task = %request.task,
        run_id = request.run_id,
        scheduled_at = %request.scheduled_at,
        attempt = request.attempt,
        trigger = %request.trigger,
        node = %request.node_id,
        isolated = true,
    );
    events.send(&Record::Started { at: Utc::now() });
    let joined = tokio::spawn((descriptor.handler)(ctx).instrument(span)).await;
    let (record, code) = match joined {
        Ok(Ok(())) => (Record::Succeeded, wire::EXIT_SUCCEEDED),
        Ok(Err(error)) => (
            Record::Failed {
                error: wire::cut(crate::causes::error_chain(&*error)),
            },
            wire::EXIT_FAILED,
        ),
        Err(error) if error.is_panic() => {
            let payload = error.into_panic();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            (
                Record::Panicked {
                    message: wire::cut(message),
                },
                wire::EXIT_PANICKED,
            )
        }
        Err(error) => (
            Record::Failed {
                error: format!("the handler's task did not finish: {error}"),
            },
            wire::EXIT_FAILED,
        ),
    };
    events.send(&record);
    code
}

#[cfg(unix)]
fn listen_for_terminate() -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
}

#[cfg(not(unix))]
fn listen_for_terminate() -> std::io::Result<std::future::Pending<()>> {
    Err(std::io::Error::other("no SIGTERM on this system"))
}

/// The child's end of the event socket; records are written whole, one at a time.
#[derive(Clone)]
struct Events {
    #[cfg(unix)]
    socket: Arc<Mutex<std::os::unix::net::UnixStream>>,
}

impl Events {
    #[cfg(unix)]
    fn open(fd: i32) -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;

        // SAFETY: `fcntl(F_GETFD)` only reads the descriptor's flags; it fails on a closed one.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if fd < 3 || flags < 0 {
            return Err(std::io::Error::other("the descriptor is not open"));
        }
        // Processes the handler starts must not hold the node's socket open.
        // SAFETY: sets the close-on-exec flag of a descriptor checked open above.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the node opened this descriptor for this process alone, left it open across
        // exec and named it in the request; nothing else in the child takes ownership of it
        // (`run_child` runs once and never returns).
        let socket = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
        Ok(Self {
            socket: Arc::new(Mutex::new(socket)),
        })
    }

    #[cfg(not(unix))]
    fn open(_fd: i32) -> std::io::Result<Self> {
        Err(std::io::Error::other("process isolation needs Unix"))
    }

    /// Sends one record; a node that stopped listening is not an error the child can act on.
    fn send(&self, record: &Record) {
        #[cfg(unix)]
        {
            let line = record.to_line();
            let mut socket = self.socket.lock().unwrap_or_else(|e| e.into_inner());
            let _ = socket.write_all(&line);
        }
        #[cfg(not(unix))]
        let _ = record;
    }
}

/// The child's subscriber: its events, filtered by `RUST_LOG` (`info` by default), to the node.
fn install_tracing(events: &Events) {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::prelude::*;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(EventForwarder {
            events: events.clone(),
        })
        .try_init();
}

/// Sends every event to the node as a [`Record::Log`].
struct EventForwarder {
    events: Events,
}

impl<S: Subscriber> Layer<S> for EventForwarder {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        self.events.send(&Record::Log {
            at: Utc::now(),
            level: meta.level().to_string(),
            target: meta.target().to_owned(),
            text: wire::cut(crate::run_log::event_text(event)),
        });
    }
}
