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

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::store::{InstanceFacts, InstancePlan, InstanceTask};

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// `christmas` (the 25th) and `boxing` (the 26th), as a node's document declares them.
    fn documents() -> Documents {
        let doc = ConfigDocument::from_json(
            r#"{"calendars": {"christmas": {"dates": ["2026-12-25"]},
                              "boxing": {"dates": ["2026-12-26"]}},
                "tasks": []}"#,
        )
        .unwrap();
        fixed(Arc::new(doc))
    }

    fn hourly() -> (InstanceWrite, ScheduleSpec) {
        crate::Schedule::new("t", "k")
            .cron("0 0 * * * *")
            .check(true)
            .unwrap()
    }

    fn first_run(write: &InstanceWrite, spec: &ScheduleSpec, task: Option<&str>) -> String {
        let facts = InstanceFacts {
            task: Some(InstanceTask {
                enabled: true,
                shards: 1,
                node_pin: None,
                jitter: None,
                calendar: task.map(str::to_owned),
                pause: None,
            }),
            existing: None,
        };
        let now = at("2026-12-24T23:59:00Z");
        match super::super::upsert::plan_upsert(write, spec, std::time::Duration::ZERO, &facts, now)
        {
            InstancePlan::Write { next_run_at, .. } => next_run_at.unwrap().to_rfc3339(),
            other => panic!("not written: {other:?}"),
        }
    }

    #[test]
    fn an_instance_s_own_calendar_is_the_document_s_and_wins_over_its_task_s() {
        let (mut write, spec) = hourly();
        let spec = with_calendar(&documents(), "boxing", &mut write, spec).unwrap();
        assert_eq!(shown(write.calendar.as_deref()).as_deref(), Some("boxing"));
        // Its task's blocks the 25th; its own, the 26th only.
        let christmas = crate::schedule::TaskCalendar::new(
            vec!["christmas".into()],
            crate::schedule::OnBlocked::Skip,
            crate::schedule::CalendarRules {
                dates: vec!["2026-12-25".into()],
                ..Default::default()
            },
        )
        .to_stored();
        assert_eq!(
            first_run(&write, &spec, Some(&christmas)),
            "2026-12-25T00:00:00+00:00"
        );
        let (plain, spec) = hourly();
        assert_eq!(
            first_run(&plain, &spec, Some(&christmas)),
            "2026-12-26T00:00:00+00:00",
            "without its own: its task's"
        );
    }

    #[test]
    fn an_unknown_name_or_no_document_is_refused_naming_the_calendar() {
        let (mut write, spec) = hourly();
        let refused = with_calendar(&documents(), "nope", &mut write, spec.clone()).unwrap_err();
        let message = refused.to_string();
        assert!(matches!(refused, InstanceRefusal::BadCalendar { .. }));
        assert!(
            message.contains("`nope`") && message.contains("t/k"),
            "{message}"
        );
        assert!(message.contains("boxing, christmas"), "{message}");
        let refused = with_calendar(&no_document(), "boxing", &mut write, spec).unwrap_err();
        assert!(
            refused.to_string().contains("no config document"),
            "{refused}"
        );
        assert_eq!(write.calendar, None, "nothing set");
    }
}
