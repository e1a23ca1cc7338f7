//! An instance's own calendar as a [`Schedules`](super::Schedules) handle resolves it: a name of
//! the `calendars` of the config document the handle reads (a node's: the document it applied),
//! turned into the stored calendar its rows carry, as a config instance's `calendar` is
//! (`crate::config::InstanceCalendars`, the one place both resolve a name).

use std::sync::Arc;

use crate::ScheduleSpec;
use crate::config::ConfigDocument;
use crate::config::InstanceCalendars;
use crate::instance::InstanceRefusal;
use crate::store::InstanceWrite;

/// The config document a handle reads the calendars its schedules name from, as it is now
/// (`None`: none, or none read yet).
pub(crate) type Documents = Arc<dyn Fn() -> Option<Arc<ConfigDocument>> + Send + Sync>;

/// A handle without a document: it knows no calendar.
pub(crate) fn no_document() -> Documents {
    Arc::new(|| None)
}

/// The handle's document `doc`, fixed.
pub(crate) fn fixed(doc: Arc<ConfigDocument>) -> Documents {
    Arc::new(move || Some(Arc::clone(&doc)))
}

/// `spec` with the calendar `name` of the document `documents` gives, read in the schedule's
/// zone, its stored form set on `write`; refused, naming the calendar, when the document does
/// not have it or there is none.
pub(super) fn with_calendar(
    documents: &Documents,
    name: &str,
    write: &mut InstanceWrite,
    spec: ScheduleSpec,
) -> Result<ScheduleSpec, InstanceRefusal> {
    let refuse = |reason: String| InstanceRefusal::BadCalendar {
        task: write.task.clone(),
        key: write.key.clone(),
        reason,
    };
    let Some(doc) = documents() else {
        return Err(refuse(format!(
            "calendar `{}` is not known here: no config document is loaded, and the calendars \
             an instance names are the config document's `calendars`",
            crate::bounds::printable(name)
        )));
    };
    // Its blocked ticks as its task's entry says (skipped without one).
    let on_blocked = doc
        .tasks
        .iter()
        .find(|entry| entry.name == write.task)
        .and_then(|entry| entry.on_blocked)
        .unwrap_or_default();
    let calendar = InstanceCalendars::of_named(&doc.calendars, on_blocked)
        .named(name, spec.timezone())
        .map_err(refuse)?;
    write.calendar = Some(calendar.stored().to_owned());
    Ok(spec.with_calendar(calendar))
}

/// The names of the calendar `stored` (a row's, stored form), as an instance shows it: the
/// document's names joined by `+`, `inline` for rules written on a task entry; `None`: none.
pub(crate) fn shown(stored: Option<&str>) -> Option<String> {
    let calendar = crate::schedule::TaskCalendar::from_stored(stored?).ok()?;
    Some(if calendar.names.is_empty() {
        "inline".to_owned()
    } else {
        calendar.names.join("+")
    })
}
