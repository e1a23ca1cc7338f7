//! Helpers shared by the `config_*` integration tests: a registry of do-nothing tasks, and a
//! capture of `tracing` output for "logged once" checks.

// Each test file uses a different subset.
#![allow(dead_code)]

use std::io;
use std::sync::{Arc, Mutex};

use scheduler::registry::{TaskFuture, TaskOptions};
use scheduler::{TaskContext, TaskDescriptor, TaskRegistry};

fn noop(_: TaskContext) -> TaskFuture {
    Box::pin(async { Ok(()) })
}

const fn task(name: &'static str) -> TaskDescriptor {
    TaskDescriptor {
        name,
        file: file!(),
        line: line!(),
        module_path: module_path!(),
        options: TaskOptions::DEFAULT,
        handler: noop,
    }
}

pub static SYNC_ADVERTISER_REPORT: TaskDescriptor = task("syncAdvertiserReport");
pub static PURGE_SESSIONS: TaskDescriptor = task("purgeSessions");
pub static SEND_DIGEST: TaskDescriptor = task("sendDigest");
pub static REBUILD_INDEX: TaskDescriptor = task("rebuildIndex");

/// `syncAdvertiserReport`, `purgeSessions`, `sendDigest` and `rebuildIndex`.
pub fn registry() -> TaskRegistry {
    TaskRegistry::from_descriptors([
        &SYNC_ADVERTISER_REPORT,
        &PURGE_SESSIONS,
        &SEND_DIGEST,
        &REBUILD_INDEX,
    ])
    .expect("distinct names")
}

/// A JSON document with one enabled task, `syncAdvertiserReport`, at `version`.
pub fn doc_json(version: i64) -> String {
    format!(
        r#"{{"version": {version}, "tasks": [{{"name": "syncAdvertiserReport", "enabled": true, "cron": "0 */5 * * * *", "timezone": "Asia/Shanghai"}}]}}"#
    )
}

/// Everything `tracing` writes on this thread while the guard lives.
pub struct LogCapture {
    buffer: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl LogCapture {
    /// Captures logs at DEBUG and above on the current thread (use a current-thread runtime).
    pub fn start() -> Self {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = SharedBuffer(buffer.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        Self { buffer, _guard }
    }

    /// The captured text so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buffer.lock().unwrap()).into_owned()
    }

    /// How many captured lines contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.text().lines().filter(|l| l.contains(needle)).count()
    }
}

#[derive(Clone)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl io::Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
