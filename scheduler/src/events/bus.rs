//! The node's event fan-out: each event tagged with its task's owners, labels and zone (an
//! instance's own owners and labels over its task's, and its own zone), sent to this node's
//! subscribers and offered to the sinks that forward it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use tokio::sync::broadcast;

use super::{EVENT_BUFFER, Event, EventStream, SchedulerEvent, TaskTags};
use crate::store::InstanceTags;

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
/// tags). A row of a task (a shard's, a node's, an instance's) has its task's; an instance with
/// owners or labels of its own has them over its task's, and its own zone, as its row in the
/// store last said (read with each claim of it, with its overdue tick, and with every row now
/// and then).
#[derive(Debug)]
struct TagBook {
    by_task: HashMap<String, Arc<TaskTags>>,
    /// The instances with tags of their own or a zone other than their task's, by row: their
    /// own tags and zone, and the tags their events carry (their task's with theirs over them,
    /// made again when a document is read).
    by_row: HashMap<String, (InstanceTags, String, Arc<TaskTags>)>,
    /// A task's tags in another zone, by task and zone: shared by its instances in that zone
    /// without tags of their own (10,000 tenants in a few zones hold a few copies, not 10,000).
    zoned: HashMap<(String, String), Arc<TaskTags>>,
    fallback: Arc<TaskTags>,
    default_owners: Vec<String>,
    default_zone: String,
}

impl TagBook {
    fn new(default_owners: Vec<String>, default_zone: String) -> Self {
        Self {
            by_task: HashMap::new(),
            by_row: HashMap::new(),
            zoned: HashMap::new(),
            fallback: Arc::new(TaskTags::defaults(&default_owners, &default_zone)),
            default_owners,
            default_zone,
        }
    }

    /// The tags of events about `task`: a task's, or a row's (an instance with tags of its own
    /// has them over its task's; any other row has its task's).
    fn of(&self, task: Option<&str>) -> Arc<TaskTags> {
        let Some(row) = task else {
            return self.fallback.clone();
        };
        if let Some((_, _, tags)) = self.by_row.get(row) {
            return tags.clone();
        }
        self.of_task(crate::shard::split_row(row).0)
    }

    fn of_task(&self, task: &str) -> Arc<TaskTags> {
        self.by_task.get(task).unwrap_or(&self.fallback).clone()
    }

    /// The tags of instance row `row` with its own `own` in `zone`: its own owners in place of
    /// its task's, its own labels over its task's (its own win on a key), its own zone.
    fn merged(&mut self, row: &str, own: &InstanceTags, zone: &str) -> Arc<TaskTags> {
        let task = crate::shard::split_row(row).0;
        if own.is_empty() {
            let of_task = self.of_task(task);
            return self
                .zoned
                .entry((task.to_owned(), zone.to_owned()))
                .or_insert_with(|| {
                    let mut tags = (*of_task).clone();
                    zone.clone_into(&mut tags.timezone);
                    Arc::new(tags)
                })
                .clone();
        }
        let mut tags = (*self.of_task(task)).clone();
        zone.clone_into(&mut tags.timezone);
        if !own.owners.is_empty() {
            tags.owners = own.owners.clone();
            tags.default_owners = false;
        }
        tags.labels
            .extend(own.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        Arc::new(tags)
    }

    /// Whether instance row `row`'s own tags `own` and zone `zone` are those noted (none noted:
    /// none of its own, in its task's zone).
    fn knows(&self, row: &str, own: &InstanceTags, zone: &str) -> bool {
        match self.by_row.get(row) {
            Some((known, known_zone, _)) => known == own && known_zone == zone,
            None => own.is_empty() && self.of_task(crate::shard::split_row(row).0).timezone == zone,
        }
    }

    /// Notes instance row `row`'s own tags and zone; `false` if they were known already.
    fn note(&mut self, row: &str, own: &InstanceTags, zone: &str) -> bool {
        if own.is_empty() && self.of_task(crate::shard::split_row(row).0).timezone == zone {
            return self.by_row.remove(row).is_some();
        }
        if self
            .by_row
            .get(row)
            .is_some_and(|(known, known_zone, _)| known == own && known_zone == zone)
        {
            return false;
        }
        let tags = self.merged(row, own, zone);
        self.by_row
            .insert(row.to_owned(), (own.clone(), zone.to_owned(), tags));
        true
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
        book.zoned.clear();
        let rows: Vec<(String, InstanceTags, String)> = book
            .by_row
            .drain()
            .map(|(row, (own, zone, _))| (row, own, zone))
            .collect();
        for (row, own, zone) in rows {
            book.note(&row, &own, &zone);
        }
    }

    /// Notes instance row `row`'s own owners and labels and its zone as its row in the store
    /// holds them (read with its claim, or its overdue tick): its events carry them from now
    /// on, over its task's (none: its task's). Any other row is left alone. Takes the write
    /// lock only when they changed.
    pub(crate) fn note_row(&self, row: &str, own: &InstanceTags, zone: &str) {
        if crate::instance::split_row(row).is_none() {
            return;
        }
        let known = self
            .tags
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .knows(row, own, zone);
        if !known {
            self.tags
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .note(row, own, zone);
        }
    }

    /// Takes every instance's own owners, labels and zone from `rows` (every row of the store,
    /// read at once: name, own tags, zone), in place of those noted before.
    pub(crate) fn set_rows<'a>(
        &self,
        rows: impl IntoIterator<Item = (&'a str, &'a InstanceTags, &'a str)>,
    ) {
        let mut book = self.tags.write().unwrap_or_else(|p| p.into_inner());
        book.by_row.clear();
        book.zoned.clear();
        for (row, own, zone) in rows {
            if crate::instance::split_row(row).is_some() {
                book.note(row, own, zone);
            }
        }
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
