//! The node's event fan-out: each event tagged with its task's owners, labels and zone, sent to
//! this node's subscribers and offered to the sinks that forward it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use tokio::sync::broadcast;

use super::{EVENT_BUFFER, Event, EventStream, SchedulerEvent, TaskTags};

/// Where [`EventBus::emit`] hands each event besides this node's subscribers, as it is raised:
/// a durable forwarder (the webhook's alert queue). Handed every event, it picks those it
/// forwards; it must not wait, and must not lose what it picked (unlike a subscriber, it never
/// falls behind).
pub(crate) trait EventSink: Send + Sync + std::fmt::Debug {
    /// Takes `event` if it is one this sink forwards; never waits.
    fn offer(&self, event: &Event);
}

/// Every task's tags by name, as the config document last read gives them, and the defaults
/// for the rest; replaced whole when a document is read (readers clone an `Arc`, never the
/// tags).
#[derive(Debug)]
struct TagBook {
    by_task: HashMap<String, Arc<TaskTags>>,
    fallback: Arc<TaskTags>,
    default_owners: Vec<String>,
    default_zone: String,
}

impl TagBook {
    fn new(default_owners: Vec<String>, default_zone: String) -> Self {
        Self {
            by_task: HashMap::new(),
            fallback: Arc::new(TaskTags::defaults(&default_owners, &default_zone)),
            default_owners,
            default_zone,
        }
    }

    fn of(&self, task: Option<&str>) -> Arc<TaskTags> {
        task.and_then(|t| self.by_task.get(t))
            .unwrap_or(&self.fallback)
            .clone()
    }
}

/// The node's event fan-out.
#[derive(Debug)]
pub(crate) struct EventBus {
    sender: broadcast::Sender<Arc<Event>>,
    dropped: Arc<AtomicU64>,
    counter: prometheus_client::metrics::counter::Counter,
    /// Where events go on, besides subscribers, if anywhere.
    sink: Option<Arc<dyn EventSink>>,
    /// A second sink attached once the node starts (the `otel` feature's run spans).
    attached: std::sync::OnceLock<Arc<dyn EventSink>>,
    /// The tags every event is sent with.
    tags: RwLock<TagBook>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::counted(prometheus_client::metrics::counter::Counter::default())
    }
}

impl EventBus {
    /// A bus whose losses are also counted in `counter` (the node's metric).
    pub(crate) fn counted(counter: prometheus_client::metrics::counter::Counter) -> Self {
        Self {
            sender: broadcast::channel(EVENT_BUFFER).0,
            dropped: Arc::new(AtomicU64::new(0)),
            counter,
            sink: None,
            attached: std::sync::OnceLock::new(),
            tags: RwLock::new(TagBook::new(Vec::new(), "UTC".to_owned())),
        }
    }

    /// Also offers every emitted event to `sink`.
    pub(crate) fn with_sink(mut self, sink: Option<Arc<dyn EventSink>>) -> Self {
        self.sink = sink;
        self
    }

    /// Tags events of tasks without owners with `owners`, and those without a zone with `zone`.
    pub(crate) fn with_defaults(self, owners: Vec<String>, zone: chrono_tz::Tz) -> Self {
        *self.tags.write().unwrap_or_else(|p| p.into_inner()) =
            TagBook::new(owners, zone.name().to_owned());
        self
    }

    /// Takes the tasks' owners, labels and zones from `doc` (the config document just read).
    pub(crate) fn set_document(&self, doc: &crate::config::ConfigDocument) {
        let mut book = self.tags.write().unwrap_or_else(|p| p.into_inner());
        let by_task = doc
            .tasks
            .iter()
            .map(|t| {
                let default_owners = t.owners.is_empty();
                let tags = TaskTags {
                    owners: if default_owners {
                        book.default_owners.clone()
                    } else {
                        t.owners.clone()
                    },
                    default_owners,
                    labels: t.labels.clone(),
                    timezone: t
                        .timezone
                        .clone()
                        .unwrap_or_else(|| book.default_zone.clone()),
                };
                (t.name.clone(), Arc::new(tags))
            })
            .collect();
        book.by_task = by_task;
    }

    /// The tags events about `task` carry now.
    pub(crate) fn tags_of(&self, task: Option<&str>) -> Arc<TaskTags> {
        self.tags.read().unwrap_or_else(|p| p.into_inner()).of(task)
    }

    /// `event` with its task's tags.
    fn tag(&self, event: SchedulerEvent) -> Event {
        let tags = self.tags_of(event.task());
        Event { event, tags }
    }

    /// Sends `event` to every subscriber and offers it to the sink, if any; never waits.
    pub(crate) fn emit(&self, event: SchedulerEvent) {
        let event = self.tag(event);
        if let Some(sink) = &self.sink {
            sink.offer(&event);
        }
        if let Some(sink) = self.attached.get() {
            sink.offer(&event);
        }
        self.send(event);
    }

    /// Hands every event emitted from now on to `sink` too; `false` if one is attached already.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub(crate) fn attach(&self, sink: Arc<dyn EventSink>) -> bool {
        self.attached.set(sink).is_ok()
    }

    /// Sends `event` to this node's subscribers only, not to the sink (another node forwards
    /// it).
    pub(crate) fn emit_local(&self, event: SchedulerEvent) {
        let event = self.tag(event);
        self.send(event);
    }

    fn send(&self, event: Event) {
        // No subscriber is not an error.
        let _ = self.sender.send(Arc::new(event));
    }

    /// A new subscriber, from now on.
    pub(crate) fn subscribe(&self) -> EventStream {
        EventStream {
            receiver: self.sender.subscribe(),
            dropped: Arc::clone(&self.dropped),
            counter: self.counter.clone(),
            lost: 0,
        }
    }

    /// Events subscribers lost by falling behind, in all.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
