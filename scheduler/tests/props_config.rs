//! Property tests over every parser a user feeds text to: the config document (JSON, TOML,
//! YAML), cron expressions, calendars, durations (an `sla` block) and the channels file. Any
//! input gives a value or an error, never a panic; the document's size and nesting depth are
//! capped before a parser sees it (the cap's own error proves the parser never ran).
//!
//! The cases are bounded (a few hundred short inputs per property) so the file runs in seconds
//! in a debug build.

mod config_support;

use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use scheduler::ScheduleSpec;
use scheduler::config::{ConfigDocument, ConfigError, ConfigFormat, check_config_text};
use scheduler::schedule::{Calendar, CalendarRules, OnBlocked, RangeRule, WeeklyRule};

const FORMATS: [ConfigFormat; 3] = [ConfigFormat::Json, ConfigFormat::Toml, ConfigFormat::Yaml];

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Text made of the pieces documents are made of, so that inputs reach deep into the parsers
/// rather than failing at the first byte.
fn document_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("[[tasks]]\n".to_owned()),
        Just("tasks".to_owned()),
        Just("\"tasks\": ".to_owned()),
        Just("tasks:\n".to_owned()),
        Just("- ".to_owned()),
        Just("  ".to_owned()),
        Just("\n".to_owned()),
        Just(": ".to_owned()),
        Just(" = ".to_owned()),
        Just(", ".to_owned()),
        Just("\"".to_owned()),
        Just("'".to_owned()),
        Just("#".to_owned()),
        Just("&a ".to_owned()),
        Just("*a".to_owned()),
        Just("|\n".to_owned()),
        Just("name".to_owned()),
        Just("cron".to_owned()),
        Just("enabled".to_owned()),
        Just("true".to_owned()),
        Just("\"0 * * * * *\"".to_owned()),
        Just("calendar".to_owned()),
        Just("sla".to_owned()),
        Just("warn_after".to_owned()),
        Just("\"500000000000years\"".to_owned()),
        Just("1e999".to_owned()),
        Just("-9223372036854775809".to_owned()),
        Just("\u{1b}[2J".to_owned()),
        Just("\u{feff}".to_owned()),
        "[a-z0-9_.]{1,8}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat())
}

/// An error is "clear" when it names its source and says something.
fn assert_clear(error: &ConfigError, source: &str) {
    let text = error.to_string();
    assert!(text.contains(source), "{text}");
    assert!(text.len() > source.len() + 10, "{text}");
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_in_any_format_gives_a_document_or_an_error_naming_the_source(
        text in prop_oneof![document_like(), any::<String>()],
    ) {
        for format in FORMATS {
            if let Err(e) = ConfigDocument::parse(&text, format, "tasks.conf") {
                assert_clear(&e, "tasks.conf");
            }
        }
        // The format sniffed, then a whole check, as `check-config` does it.
        let report = check_config_text(
            &text,
            None,
            "tasks.conf",
            &config_support::registry(),
            chrono_tz::UTC,
            Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).unwrap(),
        );
        let shown = report.to_string();
        prop_assert!(!shown.contains('\u{1b}'), "{shown}");
    }

    #[test]
    fn any_cron_expression_and_zone_give_a_schedule_or_an_error(
        expression in prop_oneof![
            "[0-9*/,LW#?A-Z -]{0,40}",
            any::<String>(),
        ],
        zone in prop_oneof![Just("UTC".to_owned()), Just("America/New_York".to_owned()), any::<String>()],
    ) {
        if let Ok(spec) = ScheduleSpec::parse(&expression, &zone) {
            // A schedule that parsed answers for its next fires.
            let after = Utc.with_ymd_and_hms(2026, 3, 8, 6, 0, 0).unwrap();
            let _ = spec.iter_after(after).take(3).count();
        }
    }

    #[test]
    fn any_calendar_rules_give_a_calendar_or_an_error(
        dates in prop::collection::vec(
            prop_oneof!["[0-9]{4}-[0-9]{2}-[0-9]{2}", "[0-9]{4}-[0-9]{2}-[0-9]{2}\\.\\.[0-9]{4}-[0-9]{2}-[0-9]{2}", any::<String>()],
            0..8,
        ),
        weekly in prop::collection::vec(
            (
                prop::collection::vec(prop_oneof!["(mon|tue|sat|sun|fri-mon|mon-sun)", any::<String>()], 0..3),
                prop::option::of(prop_oneof!["[0-2][0-9]:[0-5][0-9]", any::<String>()]),
                prop::option::of(prop_oneof!["[0-2][0-9]:[0-5][0-9](:[0-9]{2})?", any::<String>()]),
            ),
            0..4,
        ),
        ranges in prop::collection::vec(
            (
                prop_oneof!["[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2})?", any::<String>()],
                prop_oneof!["[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(Z|\\+08:00)?)?", any::<String>()],
            ),
            0..4,
        ),
        instant in 0i64..4_102_444_800,
    ) {
        let rules = CalendarRules {
            dates,
            weekly: weekly
                .into_iter()
                .map(|(days, from, to)| WeeklyRule { days, from, to })
                .collect(),
            ranges: ranges.into_iter().map(|(from, to)| RangeRule { from, to }).collect(),
        };
        match Calendar::new(rules, OnBlocked::NextAllowed, chrono_tz::America::New_York) {
            Ok(calendar) => {
                let at = Utc.timestamp_opt(instant, 0).unwrap();
                let blocked = calendar.is_blocked(at);
                if let Some(next) = calendar.next_allowed(at) {
                    prop_assert!(next >= at);
                    prop_assert_eq!(next == at, !blocked);
                    prop_assert!(!calendar.is_blocked(next));
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn any_sla_duration_gives_a_value_or_an_error_naming_the_field(
        text in prop_oneof![
            "[0-9]{1,25}(ns|ms|s|m|h|d|days|w|y|years)",
            "([0-9]{1,6}(ms|s|m|h) ?){1,6}",
            any::<String>(),
        ],
        field in prop_oneof![Just("warn_after"), Just("start_within"), Just("remind_every")],
    ) {
        let doc = serde_json::json!({
            "tasks": [{"name": "syncAdvertiserReport", "enabled": true, "cron": "0 * * * * *",
                       "sla": {field: text}}]
        })
        .to_string();
        let report = check_config_text(
            &doc,
            Some(ConfigFormat::Json),
            "tasks.json",
            &config_support::registry(),
            chrono_tz::UTC,
            Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).unwrap(),
        );
        if !report.is_ok() {
            let shown = report.to_string();
            prop_assert!(shown.contains(field), "{shown}");
            prop_assert!(!shown.contains('\u{1b}'), "{shown}");
        }
    }

    #[cfg(feature = "webhook")]
    #[test]
    fn any_channels_file_gives_channels_or_an_error(
        text in prop_oneof![document_like(), any::<String>()],
    ) {
        let env = |_: &str| None;
        for format in FORMATS {
            if let Err(e) = scheduler::channels::Channels::parse(&text, format, "channels.conf", &env) {
                prop_assert!(!e.is_empty());
            }
        }
    }
}

/// `depth` levels of nesting in `format`, the way each format nests most cheaply.
fn deep(format: ConfigFormat, depth: usize) -> String {
    match format {
        ConfigFormat::Json => format!("{{\"tasks\": {}{}}}", "[".repeat(depth), "]".repeat(depth)),
        ConfigFormat::Toml => format!("tasks = {}{}\n", "[".repeat(depth), "]".repeat(depth)),
        _ => format!("tasks: {}\n", "- ".repeat(depth) + "x"),
    }
}

fn assert_refused_by_the_depth_cap(error: ConfigError) {
    let text = error.to_string();
    assert!(
        text.contains("nests deeper than the limit of 32 levels"),
        "{text}"
    );
    assert!(text.contains("config document nesting depth"), "{text}");
    assert!(text.contains("at line 1, column"), "{text}");
}

#[test]
fn documents_64k_levels_deep_are_refused_by_the_depth_cap_in_every_format() {
    for format in FORMATS {
        let text = deep(format, 65_536);
        let e = ConfigDocument::parse(&text, format, "deep").unwrap_err();
        assert_refused_by_the_depth_cap(e);
        // Flow collections in YAML, and block ones written on lines of their own.
        if format == ConfigFormat::Yaml {
            let flow = format!("tasks: {}{}\n", "[".repeat(65_536), "]".repeat(65_536));
            assert_refused_by_the_depth_cap(
                ConfigDocument::parse(&flow, format, "deep").unwrap_err(),
            );
            let lines: String = (0..2_000)
                .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
                .collect();
            let e = ConfigDocument::parse(&lines, format, "deep").unwrap_err();
            assert!(e.to_string().contains("nests deeper than the limit"), "{e}");
        }
    }
    // TOML's dotted keys and headers nest too.
    let dotted = format!("{} = 1\n", vec!["a"; 65_536].join("."));
    assert_refused_by_the_depth_cap(
        ConfigDocument::parse(&dotted, ConfigFormat::Toml, "deep").unwrap_err(),
    );
    let header = format!("[{}]\n", vec!["a"; 65_536].join("."));
    assert_refused_by_the_depth_cap(
        ConfigDocument::parse(&header, ConfigFormat::Toml, "deep").unwrap_err(),
    );
}

#[test]
fn nesting_up_to_the_cap_reaches_the_parser() {
    // 31 brackets inside `tasks` (32 with the document itself): the parser answers, about
    // the document's shape, not the cap.
    for format in FORMATS {
        let e = ConfigDocument::parse(&deep(format, 31), format, "deep").unwrap_err();
        assert!(!e.to_string().contains("limit"), "{format}: {e}");
    }
}

#[test]
fn a_document_over_the_size_cap_is_refused_before_parsing() {
    // Valid JSON up to the end: only the size can refuse it.
    let padding = " ".repeat(8 * 1024 * 1024);
    let text = format!("{{\"tasks\": []{padding}}}");
    for format in FORMATS {
        let e = ConfigDocument::parse(&text, format, "big").unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains(&format!(
                "the document is {} bytes, larger than the limit of 8388608 bytes",
                text.len()
            )),
            "{shown}"
        );
    }
    // At the cap it is parsed.
    let at_cap = format!("{{\"tasks\": []{}}}", " ".repeat(8 * 1024 * 1024 - 13));
    assert_eq!(at_cap.len(), 8 * 1024 * 1024);
    assert!(ConfigDocument::parse(&at_cap, ConfigFormat::Json, "big").is_ok());
}

#[test]
fn a_config_file_over_the_size_cap_is_not_read_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(64 * 1024 * 1024).unwrap();
    let report = scheduler::config::check_config(
        &path,
        &config_support::registry(),
        chrono_tz::UTC,
        Utc::now(),
    );
    let shown = report.to_string();
    assert!(
        shown.contains("larger than the limit of 8388608 bytes"),
        "{shown}"
    );
}

/// Aliases that expand to billions of nodes ("billion laughs") are refused by the YAML reader.
#[test]
fn a_yaml_alias_bomb_is_refused() {
    // The anchors in a calendar's `dates`, the bomb in a task's labels and in `tasks`.
    let mut text = String::from("calendars:\n  a: {dates: &a [x, x, x, x, x, x, x, x, x]}\n");
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
    {
        let refs = vec![format!("*{prev}"); 9].join(", ");
        text.push_str(&format!("  {name}: {{dates: &{name} [{refs}]}}\n"));
    }
    text.push_str("tasks: *i\n");
    let e = ConfigDocument::parse(&text, ConfigFormat::Yaml, "bomb.yaml").unwrap_err();
    assert!(e.to_string().contains("bomb.yaml"), "{e}");
    assert!(e.to_string().contains("line 2"), "{e}");
}
