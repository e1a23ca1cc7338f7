//! Calendars in the config: named calendars shared by tasks, inline rules, lists of both,
//! `on_blocked`, and every refusal (per entry, naming the calendar), in JSON, TOML and YAML.

mod config_support;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use config_support::registry;
use scheduler::config::{
    ConfigDocument, ConfigFormat, RefusalReason, ValidatedConfig, check_config_text, validate,
};
use scheduler::schedule::OnBlocked;

const SHANGHAI: Tz = chrono_tz::Asia::Shanghai;

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn check(text: &str, format: ConfigFormat) -> ValidatedConfig {
    let doc = ConfigDocument::parse(text, format, "tasks").unwrap();
    validate(&doc, &registry(), SHANGHAI)
}

fn reasons(validated: &ValidatedConfig, name: &str) -> Vec<String> {
    validated
        .refused
        .iter()
        .filter(|r| r.name == name)
        .map(|r| r.reason.to_string())
        .collect()
}

const SHARED: &str = r#"
calendars:
  cn-holidays:
    dates: ["2026-10-01..2026-10-07", "2027-01-01"]
  weekends:
    weekly: [{days: [sat, sun]}]
  lunch:
    weekly: [{days: [mon-fri], from: "12:00", to: "13:00"}]
tasks:
  - {name: syncAdvertiserReport, enabled: true, cron: "0 0 9 * * *", calendar: cn-holidays}
  - name: sendDigest
    enabled: true
    cron: "0 0 9 * * *"
    calendar: [cn-holidays, weekends, {ranges: [{from: "2026-12-24T18:00", to: "2026-12-27"}]}]
  - name: rebuildIndex
    enabled: true
    cron: "0 * * * * *"
    calendar: lunch
    on_blocked: next_allowed
  - {name: purgeSessions, enabled: true, cron: "0 0 3 * * *", calendar: {dates: ["2026-10-01"]}}
"#;

#[test]
fn named_calendars_are_shared_and_merged_with_inline_rules() {
    let v = check(SHARED, ConfigFormat::Yaml);
    assert!(v.is_clean(), "{:?}", v.refused);
    let sync = v.desired["syncAdvertiserReport"].schedule.clone();
    let calendar = sync.calendar().expect("a calendar");
    assert_eq!(calendar.names(), ["cn-holidays"]);
    assert_eq!(calendar.on_blocked(), OnBlocked::Skip);
    // 09:00 in Shanghai is 01:00Z: the National Day week is skipped.
    assert_eq!(
        sync.next_after(at("2026-09-30T12:00:00Z")),
        Some(at("2026-10-08T01:00:00Z"))
    );

    let digest = v.desired["sendDigest"].schedule.clone();
    assert_eq!(
        digest.calendar().unwrap().names(),
        ["cn-holidays", "weekends"]
    );
    // 2026-10-08 is a Thursday, the 10th and 11th a weekend.
    let fires: Vec<_> = digest
        .iter_after(at("2026-09-30T12:00:00Z"))
        .take(3)
        .collect();
    assert_eq!(
        fires,
        [
            at("2026-10-08T01:00:00Z"),
            at("2026-10-09T01:00:00Z"),
            at("2026-10-12T01:00:00Z")
        ]
    );

    let rebuild = v.desired["rebuildIndex"].schedule.clone();
    assert_eq!(
        rebuild.calendar().unwrap().on_blocked(),
        OnBlocked::NextAllowed
    );
    // 2026-10-09 is a Friday; lunch is 04:00Z-05:00Z in Shanghai. The blocked minutes fold
    // into one run at 13:00.
    let fires: Vec<_> = rebuild
        .iter_after(at("2026-10-09T03:58:30Z"))
        .take(3)
        .collect();
    assert_eq!(
        fires,
        [
            at("2026-10-09T03:59:00Z"),
            at("2026-10-09T05:00:00Z"),
            at("2026-10-09T05:01:00Z")
        ]
    );

    let purge = v.desired["purgeSessions"].schedule.clone();
    assert!(purge.calendar().unwrap().names().is_empty(), "inline only");
}

#[test]
fn the_same_document_in_json_and_toml() {
    let json = r#"{
      "calendars": {"weekends": {"weekly": [{"days": ["sat", "sun"]}]}},
      "tasks": [
        {"name": "sendDigest", "enabled": true, "cron": "0 0 9 * * *", "calendar": "weekends"},
        {"name": "rebuildIndex", "enabled": true, "cron": "0 0 9 * * *",
         "calendar": ["weekends", {"dates": ["2026-10-01"]}], "on_blocked": "skip"}
      ]
    }"#;
    let v = check(json, ConfigFormat::Json);
    assert!(v.is_clean(), "{:?}", v.refused);
    let toml = r#"
[calendars.weekends]
weekly = [{days = ["sat", "sun"]}]

[[tasks]]
name = "sendDigest"
enabled = true
cron = "0 0 9 * * *"
calendar = "weekends"
on_blocked = "next_allowed"
"#;
    let v = check(toml, ConfigFormat::Toml);
    assert!(v.is_clean(), "{:?}", v.refused);
    assert_eq!(
        v.desired["sendDigest"]
            .schedule
            .calendar()
            .unwrap()
            .on_blocked(),
        OnBlocked::NextAllowed
    );
}

#[test]
fn an_unknown_calendar_name_is_refused_with_the_names_there_are() {
    let v = check(
        r#"
calendars:
  weekends: {weekly: [{days: [sat, sun]}]}
tasks:
  - {name: sendDigest, enabled: true, cron: "0 0 9 * * *", calendar: [weekends, cn-holidays]}
  - {name: rebuildIndex, enabled: true, cron: "0 0 9 * * *"}
"#,
        ConfigFormat::Yaml,
    );
    assert!(!v.desired.contains_key("sendDigest"));
    assert!(
        v.desired.contains_key("rebuildIndex"),
        "other entries stand"
    );
    assert_eq!(
        reasons(&v, "sendDigest"),
        ["calendar `cn-holidays` is not in the document's `calendars`; it has weekends"]
    );
    assert!(matches!(
        v.refused[0].reason,
        RefusalReason::UnknownCalendar { .. }
    ));
}

#[test]
fn bad_rules_are_refused_per_entry_naming_the_calendar_even_when_disabled() {
    let v = check(
        r#"
calendars:
  cn-holidays: {dates: ["2026-10-01", "2026-13-01"]}
tasks:
  - {name: sendDigest, enabled: false, cron: "0 0 9 * * *", calendar: cn-holidays}
  - name: rebuildIndex
    enabled: true
    cron: "0 0 9 * * *"
    calendar: {weekly: [{days: [mon], from: "12:00", to: "12:00"}, {days: [funday]}]}
  - {name: purgeSessions, enabled: true, cron: "0 0 3 * * *", on_blocked: next_allowed}
  - {name: syncAdvertiserReport, enabled: true, cron: "0 0 3 * * *", calendar: {weekly: [{days: [mon-sun]}]}}
"#,
        ConfigFormat::Yaml,
    );
    assert!(v.desired.is_empty(), "{:?}", v.desired.keys());
    assert_eq!(
        reasons(&v, "sendDigest"),
        [
            "calendar `cn-holidays`: date `2026-13-01` is not a date; write YYYY-MM-DD, e.g. 2026-10-01"
        ]
    );
    let rebuild = reasons(&v, "rebuildIndex");
    assert_eq!(rebuild.len(), 1, "{rebuild:?}");
    assert!(
        rebuild[0].starts_with("calendar: weekly window from `12:00` to `12:00` is empty"),
        "{rebuild:?}"
    );
    assert_eq!(
        reasons(&v, "purgeSessions"),
        ["`on_blocked` is set but the task has no `calendar`; add one or remove `on_blocked`"]
    );
    assert_eq!(
        reasons(&v, "syncAdvertiserReport"),
        ["calendar: the weekly windows cover the whole week: the task would never run"]
    );
}

#[test]
fn calendars_that_together_block_the_whole_week_are_refused() {
    let v = check(
        r#"
calendars:
  weekdays: {weekly: [{days: [mon-fri]}]}
  weekends: {weekly: [{days: [sat, sun]}]}
tasks:
  - {name: sendDigest, enabled: true, cron: "0 0 9 * * *", calendar: [weekdays, weekends]}
"#,
        ConfigFormat::Yaml,
    );
    assert_eq!(
        reasons(&v, "sendDigest"),
        ["calendar: the weekly windows cover the whole week: the task would never run"]
    );
}

#[test]
fn a_typo_in_a_calendar_is_refused_by_name_when_parsed() {
    let err = ConfigDocument::parse(
        r#"{"calendars": {"x": {"date": ["2026-10-01"]}}, "tasks": []}"#,
        ConfigFormat::Json,
        "tasks.json",
    )
    .unwrap_err();
    assert!(err.to_string().contains("unknown field `date`"), "{err}");
    let err = ConfigDocument::parse(
        r#"{"tasks": [{"name": "a", "enabled": true, "cron": "* * * * *", "calendar": {"weekly": [{"day": ["sat"]}]}}]}"#,
        ConfigFormat::Json,
        "tasks.json",
    )
    .unwrap_err();
    assert!(err.to_string().contains("unknown field `day`"), "{err}");
    let err = ConfigDocument::parse(
        r#"{"tasks": [{"name": "a", "enabled": true, "cron": "* * * * *", "calendar": "x", "on_blocked": "later"}]}"#,
        ConfigFormat::Json,
        "tasks.json",
    )
    .unwrap_err();
    assert!(err.to_string().contains("unknown variant `later`"), "{err}");
}

#[test]
fn check_config_lists_calendar_problems_and_fire_times_that_honour_the_calendar() {
    let report = check_config_text(
        SHARED,
        Some(ConfigFormat::Yaml),
        "tasks.yaml",
        &registry(),
        SHANGHAI,
        at("2026-09-30T12:00:00Z"),
    );
    assert!(report.is_ok(), "{report}");
    let text = report.to_string();
    assert!(
        text.contains("task `syncAdvertiserReport`: enabled, cron `0 0 9 * * *`, zone Asia/Shanghai, calendar cn-holidays (skip)"),
        "{text}"
    );
    let sync = report
        .tasks
        .iter()
        .find(|t| t.name == "syncAdvertiserReport")
        .unwrap();
    assert_eq!(sync.next_fire_times[0], at("2026-10-08T01:00:00Z"));
    assert_eq!(
        sync.calendar.as_deref(),
        Some("calendar cn-holidays (skip)")
    );

    let report = check_config_text(
        "tasks:\n  - {name: sendDigest, enabled: true, cron: '0 0 9 * * *', calendar: nope}\n",
        Some(ConfigFormat::Yaml),
        "tasks.yaml",
        &registry(),
        SHANGHAI,
        at("2026-09-30T12:00:00Z"),
    );
    assert!(!report.is_ok());
    assert!(
        report.to_string().contains(
            "error: task `sendDigest`: calendar `nope` is not in the document's `calendars`; the document has no `calendars`"
        ),
        "{report}"
    );
}

#[test]
fn the_readme_example_is_a_valid_document() {
    // The README's calendar example lives on the calendars page of the reference.
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/calendars.md"))
            .unwrap();
    let yaml = page
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("its example");
    let v = check(yaml, ConfigFormat::Yaml);
    assert!(v.is_clean(), "{:?}", v.refused);
    assert_eq!(v.desired.len(), 2);
}
