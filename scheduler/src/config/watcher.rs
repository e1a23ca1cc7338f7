//! [`ConfigWatcher`]: polls a [`ConfigSource`] and publishes the last good document.
//!
//! A small service: [`poll_once`](ConfigWatcher::poll_once) does one fetch and says what happened,
//! and [`run`](ConfigWatcher::run) is a thin loop around it. A document that cannot be fetched or
//! parsed changes nothing; the last good one stays current. It does not validate entries against
//! the registry nor compare `version`s; that is the reconciler's job.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{ConfigDocument, ConfigError, ConfigSource, Fetched};

/// Default time between two polls.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(10);
/// Shortest accepted time between two polls; shorter settings are raised to this.
pub const MIN_POLL_INTERVAL: Duration = crate::bounds::CONFIG_POLL_INTERVAL.min;

/// What one [`ConfigWatcher::poll_once`] did.
#[derive(Debug)]
pub enum PollOutcome {
    /// Nothing new: the source reported no change, or the new text parses to the current document.
    Unchanged,
    /// A new document is now current.
    Changed(Arc<ConfigDocument>),
    /// Fetching or parsing failed; the previous document (if any) stays current.
    Failed(ConfigError),
}

/// Polls a [`ConfigSource`], keeping the last good [`ConfigDocument`].
///
/// ```
/// use std::sync::Arc;
/// use scheduler::config::{
///     ConfigError, ConfigSource, ConfigWatcher, Fetched, PollOutcome, RawConfig,
/// };
///
/// struct Inline(&'static str);
///
/// #[async_trait::async_trait]
/// impl ConfigSource for Inline {
///     fn describe(&self) -> String {
///         "inline".to_owned()
///     }
///     async fn fetch(&mut self) -> Result<Fetched, ConfigError> {
///         Ok(Fetched::Changed(RawConfig::new(self.0)))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut watcher = ConfigWatcher::new(Inline(r#"{"tasks": []}"#));
/// assert!(matches!(watcher.poll_once().await, PollOutcome::Changed(_)));
/// // Same document again: no event.
/// assert!(matches!(watcher.poll_once().await, PollOutcome::Unchanged));
/// assert_eq!(watcher.current().map(|d| d.tasks.len()), Some(0));
/// # }
/// ```
pub struct ConfigWatcher {
    source: Box<dyn ConfigSource>,
    source_name: String,
    poll_interval: Duration,
    current: Option<Arc<ConfigDocument>>,
    /// Display of the last error logged, so a persisting failure is logged once, not every poll.
    last_error: Option<String>,
    /// Why the source's latest text failed to parse, if it did: its `Unchanged` then means
    /// "still broken".
    bad_text_error: Option<String>,
}

impl std::fmt::Debug for ConfigWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatcher")
            .field("source", &self.source_name)
            .field("poll_interval", &self.poll_interval)
            .field("version", &self.current.as_ref().map(|d| d.version))
            .finish_non_exhaustive()
    }
}

impl ConfigWatcher {
    /// A watcher for `source`, with no document yet, polling every [`DEFAULT_POLL_INTERVAL`].
    pub fn new(source: impl ConfigSource + 'static) -> Self {
        let source_name = source.describe();
        Self {
            source: Box::new(source),
            source_name,
            poll_interval: DEFAULT_POLL_INTERVAL,
            current: None,
            last_error: None,
            bad_text_error: None,
        }
    }

    /// Time between two polls in [`run`](Self::run). Default [`DEFAULT_POLL_INTERVAL`]; values
    /// below [`MIN_POLL_INTERVAL`] are raised to it.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval.max(MIN_POLL_INTERVAL);
        self
    }

    /// The configured poll interval.
    pub fn interval(&self) -> Duration {
        self.poll_interval
    }

    /// The source's description (redacted).
    pub fn source_name(&self) -> &str {
        &self.source_name
    }

    /// The last good document, if one was ever fetched.
    pub fn current(&self) -> Option<Arc<ConfigDocument>> {
        self.current.clone()
    }

    /// The failure currently in effect (for a health endpoint), or `None` while the source works.
    ///
    /// Cleared once the source answers again and, if the last text did not parse, once a new
    /// text parses.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Fetches once and reports what happened. Never sleeps.
    pub async fn poll_once(&mut self) -> PollOutcome {
        let fetched = match self.source.fetch().await {
            Ok(fetched) => fetched,
            Err(e) => return self.failed(e),
        };
        let raw = match fetched {
            Fetched::Unchanged => {
                match &self.bad_text_error {
                    None => self.recovered(),
                    // Reachable again (if it was not), but still serving the broken text, which
                    // was logged when it arrived.
                    Some(error) => self.last_error = Some(error.clone()),
                }
                return PollOutcome::Unchanged;
            }
            Fetched::Changed(raw) => raw,
        };
        let doc = match raw.parse(&self.source_name) {
            Ok(doc) => doc,
            Err(e) => {
                self.bad_text_error = Some(e.to_string());
                return self.failed(e);
            }
        };
        self.bad_text_error = None;
        self.recovered();
        if self.current.as_deref() == Some(&doc) {
            tracing::debug!(
                source = %self.source_name,
                revision = raw.revision.as_deref(),
                "config text changed but the document is the same",
            );
            return PollOutcome::Unchanged;
        }
        let doc = Arc::new(doc);
        tracing::info!(
            source = %self.source_name,
            version = doc.version,
            revision = raw.revision.as_deref(),
            tasks = doc.tasks.len(),
            "loaded new config document",
        );
        self.current = Some(doc.clone());
        PollOutcome::Changed(doc)
    }

    /// Polls until `shutdown` is cancelled, publishing every new document on `tx`. The first
    /// poll happens at once; a failure never replaces the published document.
    pub async fn run(
        mut self,
        shutdown: CancellationToken,
        tx: watch::Sender<Option<Arc<ConfigDocument>>>,
    ) {
        tracing::debug!(source = %self.source_name, interval = ?self.poll_interval, "config watcher started");
        loop {
            let outcome = tokio::select! {
                _ = shutdown.cancelled() => break,
                outcome = self.poll_once() => outcome,
            };
            if let PollOutcome::Changed(doc) = outcome {
                tx.send_replace(Some(doc));
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.poll_interval) => {}
            }
        }
        tracing::debug!(source = %self.source_name, "config watcher stopped");
    }

    fn failed(&mut self, error: ConfigError) -> PollOutcome {
        let message = error.to_string();
        if self.last_error.as_deref() != Some(message.as_str()) {
            match &self.current {
                Some(doc) => tracing::warn!(
                    error = %message,
                    version = doc.version,
                    "config update failed; keeping the last good document",
                ),
                None => tracing::error!(
                    error = %message,
                    "config cannot be loaded and there is no previous document",
                ),
            }
            self.last_error = Some(message);
        }
        PollOutcome::Failed(error)
    }

    fn recovered(&mut self) {
        if let Some(error) = self.last_error.take() {
            tracing::info!(source = %self.source_name, previous_error = %error, "config source recovered");
        }
    }
}
