//! `check_config` on real files: every problem listed, next fire times for the good entries.

mod config_support;

use std::fs;

use chrono::{DateTime, TimeZone, Utc};
use config_support::registry;
use scheduler::config::{CheckProblem, ConfigError, RefusalReason, check_config};

const BERLIN: chrono_tz::Tz = chrono_tz::Europe::Berlin;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).unwrap()
}

const MIXED: &str = r#"{
  "version": 12,
  "tasks": [
    {"name": "syncAdvertiserReport", "enabled": true, "cron": "0 */5 * * * *", "timezone": "Asia/Shanghai"},
    {"name": "purgeSessions", "enabled": false, "cron": "0 0 3 * * *"},
    {"name": "syncAdvertizerReport", "enabled": true, "cron": "0 * * * * *"},
    {"name": "sendDigest", "enabled": true, "cron": "0 0 8 * * *", "timezone": "Europe/Berln"},
    {"name": "rebuildIndex", "enabled": true, "cron": "0 0 1 * * *"},
    {"name": "rebuildIndex", "enabled": true, "cron": "0 0 2 * * *"}
  ]
}"#;

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_mixed_file_lists_every_problem_and_the_valid_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "tasks.json", MIXED);
    let report = check_config(&path, &registry(), BERLIN, now());

    assert!(!report.is_ok());
    assert_eq!(report.version, Some(12));
    let refusals: Vec<(&str, &RefusalReason)> = report
        .problems
        .iter()
        .map(|p| match p {
            CheckProblem::Refused(r) => (r.name.as_str(), &r.reason),
            other => panic!("unexpected problem {other}"),
        })
        .collect();
    assert_eq!(refusals.len(), 3, "{refusals:?}");
    assert_eq!(
        refusals[0],
        ("syncAdvertizerReport", &RefusalReason::UnknownTask)
    );
    assert!(matches!(
        refusals[1],
        ("sendDigest", RefusalReason::InvalidTimezone(_))
    ));
    assert_eq!(
        refusals[2],
        ("rebuildIndex", &RefusalReason::DuplicateEntry { count: 2 })
    );

    let names: Vec<&str> = report.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["purgeSessions", "syncAdvertiserReport"]);
    let purge = &report.tasks[0];
    assert!(!purge.enabled);
    assert_eq!(purge.timezone, BERLIN);
    assert_eq!(report.tasks[1].timezone, chrono_tz::Asia::Shanghai);

    let shown = report.to_string();
    assert!(shown.starts_with(&format!(
        "{} (version 12): 3 problem(s), 2 valid task(s)\n",
        path.display()
    )));
    for needle in [
        "error: task `syncAdvertizerReport`: no task with this name is registered",
        "error: task `sendDigest`: ",
        "Europe/Berln",
        "error: task `rebuildIndex`: listed 2 times",
        "task `syncAdvertiserReport`: enabled, cron `0 */5 * * * *`, zone Asia/Shanghai",
        "task `purgeSessions`: disabled, cron `0 0 3 * * *`, zone Europe/Berlin",
    ] {
        assert!(shown.contains(needle), "missing {needle:?} in:\n{shown}");
    }
    assert!(report.absent.is_empty());
}

#[test]
fn valid_tasks_show_their_next_three_fire_times_in_utc() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "tasks.json", MIXED);
    let report = check_config(&path, &registry(), BERLIN, now());

    let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
    let sync = report
        .tasks
        .iter()
        .find(|t| t.name == "syncAdvertiserReport")
        .unwrap();
    assert_eq!(
        sync.next_fire_times,
        [
            at("2026-11-30T10:05:00Z"),
            at("2026-11-30T10:10:00Z"),
            at("2026-11-30T10:15:00Z")
        ]
    );
    // 03:00 in Berlin (UTC+1 in winter), even though the task is disabled.
    let purge = report
        .tasks
        .iter()
        .find(|t| t.name == "purgeSessions")
        .unwrap();
    assert_eq!(
        purge.next_fire_times,
        [
            at("2026-12-01T02:00:00Z"),
            at("2026-12-02T02:00:00Z"),
            at("2026-12-03T02:00:00Z")
        ]
    );
    let shown = report.to_string();
    for needle in [
        "next: 2026-11-30T10:05:00Z",
        "next: 2026-11-30T10:15:00Z",
        "next: 2026-12-03T02:00:00Z",
    ] {
        assert!(shown.contains(needle), "missing {needle:?} in:\n{shown}");
    }
}

#[test]
fn a_bad_cron_is_listed_with_the_other_problems() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "tasks.toml",
        r#"
[[tasks]]
name = "sendDigest"
enabled = false
cron = "0 0 25 * * *"

[[tasks]]
name = "ghost"
enabled = true
cron = "0 0 1 * * *"
"#,
    );
    let report = check_config(&path, &registry(), BERLIN, now());
    assert_eq!(report.problems.len(), 2, "{report}");
    let shown = report.to_string();
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("  error: task `sendDigest`: ") && l.contains("0 0 25 * * *")),
        "{shown}"
    );
    assert!(shown.contains("error: task `ghost`"), "{shown}");
}

#[test]
fn a_parse_error_is_the_one_problem_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "tasks.yaml",
        "tasks:\n  - name: purgeSessions\n    enable: true\n    cron: 0 0 3 * * *\n",
    );
    let report = check_config(&path, &registry(), BERLIN, now());
    assert!(!report.is_ok());
    let [CheckProblem::Unreadable(ConfigError::Parse { line, .. })] = report.problems.as_slice()
    else {
        panic!("expected one parse error: {report}");
    };
    assert_eq!(*line, Some(3));
    let shown = report.to_string();
    assert!(shown.contains("unknown field `enable`"), "{shown}");
    assert!(shown.contains("tasks.yaml"), "{shown}");
    assert!(report.tasks.is_empty());
}

#[test]
fn a_missing_file_is_a_problem() {
    let dir = tempfile::tempdir().unwrap();
    let report = check_config(dir.path().join("nope.json"), &registry(), BERLIN, now());
    assert!(!report.is_ok());
    assert!(matches!(
        report.problems.as_slice(),
        [CheckProblem::Unreadable(ConfigError::Io { .. })]
    ));
    assert!(report.to_string().contains("nope.json"), "{report}");
}

#[test]
fn a_clean_file_is_ok_and_mentions_unconfigured_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "tasks.toml",
        "[[tasks]]\nname = \"purgeSessions\"\nenabled = true\ncron = \"0 0 3 * * *\"\n",
    );
    let report = check_config(&path, &registry(), BERLIN, now());
    assert!(report.is_ok(), "{report}");
    assert_eq!(
        report.absent,
        ["rebuildIndex", "sendDigest", "syncAdvertiserReport"]
    );
    let shown = report.to_string();
    assert!(shown.contains(": ok, 1 task(s)"), "{shown}");
    assert!(
        shown.contains("warning: registered task `sendDigest` is not in the config"),
        "{shown}"
    );
}

/// The `sla` block: a good one is shown with its task, each bad field refuses the entry and is
/// named (in YAML, as operators write it).
#[test]
fn service_levels_are_checked_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "tasks.yaml",
        r#"
tasks:
  - name: syncAdvertiserReport
    enabled: true
    cron: 0 0 6 * * *
    sla: { start_within: "30s", warn_after: "10m", succeed_by: "08:00", alert_after_failures: 3, remind_every: 1h }
  - name: purgeSessions
    enabled: false
    cron: 0 0 3 * * *
    sla: { start_within: soon, succeed_by: "8 am" }
"#,
    );
    let report = check_config(&path, &registry(), BERLIN, now());
    let refused: Vec<String> = report
        .problems
        .iter()
        .map(|p| match p {
            CheckProblem::Refused(r) => {
                assert_eq!(r.name, "purgeSessions");
                assert!(matches!(r.reason, RefusalReason::InvalidSla(_)));
                r.reason.to_string()
            }
            other => panic!("unexpected problem {other}"),
        })
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0].contains("`sla.start_within`: `soon`"),
        "{refused:?}"
    );
    assert!(refused[1].contains("sla.succeed_by: `8 am`"), "{refused:?}");
    let shown = report.to_string();
    assert!(
        shown.contains(
            "sla: start within 30s, warn after 10m, succeed by 08:00:00, alert after 3 failures in a row, remind every 1h"
        ),
        "{shown}"
    );
}

/// Text a config quotes back (a task's name, a label, an unknown field, a cron) reaches the
/// terminal with its control characters escaped: `check-config` as the CLI runs it.
#[cfg(feature = "cli")]
#[test]
fn check_config_prints_control_characters_escaped() {
    let dir = tempfile::tempdir().unwrap();
    // JSON escapes decode to raw control characters in the values.
    let path = write(
        &dir,
        "tasks.json",
        r#"{"tasks": [
  {"name": "\u001b]0;owned\u0007\u001b[2Jgone", "enabled": true, "cron": "0 * * * * *"},
  {"name": "purgeSessions", "enabled": true, "cron": "0 0 3 * * *",
   "labels": {"team": "ads\r\u001b[31mred"}, "owners": ["a\u0008b"]},
  {"name": "sendDigest", "enabled": true, "cron": "0 0 8 * * *\u001b[1m"}
]}"#,
    );
    let args = scheduler::cli::CheckConfigArgs {
        path: path.clone(),
        tz: Some("UTC".to_owned()),
        channels: None,
    };
    let mut out = Vec::new();
    let ok = args.run(&registry(), &mut out).unwrap();
    assert!(!ok);
    let shown = String::from_utf8(out).unwrap();
    let raw: Vec<char> = shown
        .chars()
        .filter(|c| c.is_control() && *c != '\n')
        .collect();
    assert!(
        raw.is_empty(),
        "raw control characters {raw:?} in:\n{shown}"
    );
    for escaped in [
        r"task `\u{1b}]0;owned\u{7}\u{1b}[2Jgone`",
        r"invalid owner `a\u{8}b`",
        r"invalid cron `0 0 8 * * *\u{1b}[1m`",
    ] {
        assert!(shown.contains(escaped), "`{escaped}` not in:\n{shown}");
    }

    // An unknown field's name, quoted by the parser's own message.
    let path = write(
        &dir,
        "typo.json",
        r#"{"tasks": [{"name": "a", "enabled": true, "cron": "* * * * * *", "\u001b[2Jx": 1}]}"#,
    );
    let args = scheduler::cli::CheckConfigArgs {
        path,
        tz: None,
        channels: None,
    };
    let mut out = Vec::new();
    assert!(!args.run(&registry(), &mut out).unwrap());
    let shown = String::from_utf8(out).unwrap();
    assert!(!shown.contains('\u{1b}'), "{shown}");
    assert!(shown.contains(r"unknown field `\u{1b}[2Jx`"), "{shown}");
}

/// 20,000 calendar dates (a generated holiday list): checked, and the next fire times found
/// past them (the dates are merged into spans and searched, not scanned per tick).
#[test]
fn twenty_thousand_calendar_dates_are_checked_and_skipped() {
    let first = chrono::NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
    let dates: Vec<String> = (0..20_000u64)
        .map(|i| format!("\"{}\"", first + chrono::Days::new(i)))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "tasks.json",
        &format!(
            r#"{{"calendars": {{"generated": {{"dates": [{}]}}}},
              "tasks": [{{"name": "purgeSessions", "enabled": true, "cron": "0 0 3 * * *",
                          "calendar": "generated"}}]}}"#,
            dates.join(",")
        ),
    );
    let report = check_config(&path, &registry(), chrono_tz::UTC, now());
    assert!(report.is_ok(), "{report}");
    let task = &report.tasks[0];
    let after = first + chrono::Days::new(20_000);
    let expected: Vec<DateTime<Utc>> = (0..3u64)
        .map(|i| {
            (after + chrono::Days::new(i))
                .and_hms_opt(3, 0, 0)
                .unwrap()
                .and_utc()
        })
        .collect();
    assert_eq!(task.next_fire_times, expected);
    assert_eq!(task.calendar.as_deref(), Some("calendar generated (skip)"));
}

/// Limits shared by tasks: a bad size and an undeclared limit are listed with the other
/// problems, naming them; a good entry shows its limit and size.
#[test]
fn limits_are_checked_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"{
      "limits": {"warehouse-db": 2, "broken": 0},
      "tasks": [
        {"name": "syncAdvertiserReport", "enabled": true, "cron": "0 */5 * * * *", "limit": "warehouse-db"},
        {"name": "purgeSessions", "enabled": true, "cron": "0 0 3 * * *", "limit": "broken"},
        {"name": "rebuildIndex", "enabled": true, "cron": "0 0 1 * * *", "limit": "nope"}
      ]
    }"#;
    let path = write(&dir, "tasks.json", text);
    let report = check_config(&path, &registry(), BERLIN, now());
    assert!(!report.is_ok());
    let shown = report.to_string();
    assert!(
        shown.contains("error: `limits.broken`: 0 is out of range; accepted: from 1 to 100000"),
        "{shown}"
    );
    assert!(
        shown.contains("task `purgeSessions`: its limit is refused: `limits.broken`"),
        "{shown}"
    );
    assert!(
        shown.contains("task `rebuildIndex`: limit `nope` is not declared in the document's `limits` (it declares warehouse-db)"),
        "{shown}"
    );
    assert!(
        shown.contains("limit: warehouse-db (at most 2 of its tasks' runs at once)"),
        "{shown}"
    );
    let good: Vec<&str> = report.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(good, ["syncAdvertiserReport"]);
}
