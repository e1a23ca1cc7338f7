use chrono::{DateTime, Utc};

use crate::config::{ConfigDocument, validate_with};
use crate::registry::{TaskDescriptor, TaskFuture, TaskOptions};
use crate::schedule::{CalendarRules, OnBlocked, SpecCache, TaskCalendar};
use crate::store::{InstanceSource, TaskChange, TaskRow};
use crate::{TaskContext, TaskRegistry};

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn noop(_: TaskContext) -> TaskFuture {
    Box::pin(async { Ok(()) })
}

static TASK: TaskDescriptor = TaskDescriptor {
    name: "t",
    file: file!(),
    line: line!(),
    module_path: module_path!(),
    options: TaskOptions::DEFAULT,
    handler: noop,
};

/// The calendar `name` blocking `date`, as an instance naming it stores it.
fn stored(name: &str, date: &str) -> String {
    let rules = CalendarRules {
        dates: vec![date.into()],
        ..Default::default()
    };
    TaskCalendar::new(vec![name.into()], OnBlocked::Skip, rules).to_stored()
}

/// An hourly row of `t` (of 2 shards), made at run time, holding `calendar`.
fn row(name: &str, calendar: Option<String>) -> TaskRow {
    let mut row = TaskRow::new(name, "0 0 * * * *", "UTC", true);
    row.calendar = calendar;
    row.next_run_at = Some(at("2026-12-26T00:00:00Z"));
    row.shards = 2;
    row
}

/// The changes and the report of `doc` over `rows` at 2026-12-24T23:30Z.
fn plan(doc: &str, rows: &[TaskRow]) -> (Vec<TaskChange>, crate::reconciler::ReconcileReport) {
    let doc = ConfigDocument::from_json(doc).unwrap();
    let registry = TaskRegistry::from_descriptors([&TASK]).unwrap();
    let validated = validate_with(&doc, &registry, chrono_tz::UTC, &SpecCache::default());
    let mut rows = rows.to_vec();
    let mut task = TaskRow::new("t", "0 0 0 1 1 *", "UTC", true);
    task.next_run_at = Some(at("2027-01-01T00:00:00Z"));
    rows.push(task);
    super::super::plan(
        &doc,
        &validated,
        &registry,
        &rows,
        at("2026-12-24T23:30:00Z"),
        "n1",
    )
}

const NOW_BOXING: &str = r#"{"calendars": {"c": {"dates": ["2026-12-26"]}},
    "tasks": [{"name": "t", "enabled": true, "cron": "0 0 0 1 1 *", "shards": 2}]}"#;

/// The updates of instances' rows in `changes`: `(row, calendar, next run)`.
fn updates(changes: &[TaskChange]) -> Vec<(String, Option<String>, Option<DateTime<Utc>>)> {
    changes
        .iter()
        .filter_map(|change| match change {
            TaskChange::Update {
                name,
                calendar,
                next_run_at,
                ..
            } if name.starts_with("t/") => Some((name.clone(), calendar.clone(), *next_run_at)),
            _ => None,
        })
        .collect()
}

#[test]
fn rows_naming_a_changed_calendar_take_its_new_rules_and_their_next_run_under_them() {
    // `c` blocked the 25th (the next run moved to the 26th); the document now has it block the
    // 26th: the instance's rows (its shard's too) run on the 25th again.
    let old = stored("c", "2026-12-25");
    let rows = [row("t/k", Some(old.clone())), row("t/k[1]", Some(old))];
    let (changes, report) = plan(NOW_BOXING, &rows);
    let new = Some(stored("c", "2026-12-26"));
    let next = Some(at("2026-12-25T00:00:00Z"));
    assert_eq!(
        updates(&changes),
        [
            ("t/k".to_owned(), new.clone(), next),
            ("t/k[1]".to_owned(), new, next)
        ]
    );
    assert!(report.updated.contains(&"t/k".to_owned()), "{report:?}");
    assert!(report.kept_calendars.is_empty());
}

#[test]
fn unchanged_rules_other_sources_and_rows_without_a_calendar_of_their_own_are_left_alone() {
    let same = row("t/same", Some(stored("c", "2026-12-26")));
    let mut config = row("t/config", Some(stored("c", "2026-12-25")));
    config.instance_source = InstanceSource::Config;
    let mut removed = row("t/removed", Some(stored("c", "2026-12-25")));
    removed.removed = true;
    let plain = row("t/plain", None);
    let inline = row(
        "t/inline",
        Some(TaskCalendar::new(Vec::new(), OnBlocked::Skip, CalendarRules::default()).to_stored()),
    );
    let (changes, _) = plan(NOW_BOXING, &[same, config, removed, plain, inline]);
    let touched: Vec<String> = updates(&changes).into_iter().map(|u| u.0).collect();
    // The config's own instance `t/config`, no longer declared, is disabled (its rules kept).
    assert_eq!(touched, ["t/config"]);
    assert_eq!(
        updates(&changes)[0].1,
        Some(stored("c", "2026-12-25")),
        "a config instance's calendar is the config's to resolve"
    );
}

#[test]
fn a_calendar_the_document_no_longer_has_is_kept_and_said_once() {
    let old = stored("gone", "2026-12-25");
    let rows = [row("t/a", Some(old.clone())), row("t/b", Some(old))];
    let (changes, report) = plan(NOW_BOXING, &rows);
    assert_eq!(updates(&changes), [], "{changes:?}");
    assert_eq!(report.kept_calendars.len(), 1, "{report:?}");
    let (name, why) = &report.kept_calendars[0];
    assert_eq!(name, "gone");
    assert!(why.contains("`gone`"), "{why}");
}

#[test]
fn an_instance_enabled_with_its_task_takes_the_new_rules_in_its_one_update() {
    let mut disabled = row("t/k", Some(stored("c", "2026-12-25")));
    disabled.enabled = false;
    disabled.next_run_at = None;
    let (changes, _) = plan(NOW_BOXING, &[disabled]);
    assert_eq!(
        updates(&changes),
        [(
            "t/k".to_owned(),
            Some(stored("c", "2026-12-26")),
            Some(at("2026-12-25T00:00:00Z"))
        )]
    );
}

#[test]
fn the_entry_s_on_blocked_is_the_rules_instances_take() {
    let doc = r#"{"calendars": {"c": {"dates": ["2026-12-25"]}, "far": {"dates": ["2099-01-01"]}},
        "tasks": [{"name": "t", "enabled": true, "cron": "0 0 0 1 1 *", "shards": 2,
                   "calendar": "far", "on_blocked": "next_allowed"}]}"#;
    let (changes, _) = plan(doc, &[row("t/k", Some(stored("c", "2026-12-25")))]);
    let rules = CalendarRules {
        dates: vec!["2026-12-25".into()],
        ..Default::default()
    };
    let moved = TaskCalendar::new(vec!["c".into()], OnBlocked::NextAllowed, rules).to_stored();
    assert_eq!(updates(&changes)[0].1, Some(moved));
}
