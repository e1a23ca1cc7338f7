//! Messages, classification and pinned DST regressions; fire times at large are covered by
//! `tests/schedule_golden.rs` and `tests/schedule_props.rs`.

use chrono::{DateTime, Utc};

use super::{CronField, ScheduleSpec};

#[track_caller]
fn refusal(expression: &str) -> (String, Option<CronField>) {
    match ScheduleSpec::parse(expression, "UTC") {
        Ok(_) => panic!("`{expression}` was accepted"),
        Err(error) => (error.to_string(), error.field()),
    }
}

#[track_caller]
fn assert_refused(expression: &str, field: Option<CronField>, message: &str) {
    let (actual, actual_field) = refusal(expression);
    assert_eq!(actual, message, "message for `{expression}`");
    assert_eq!(actual_field, field, "field for `{expression}`");
}

#[test]
fn out_of_range_values_name_field_value_and_range() {
    assert_refused(
        "0 24 * * *",
        Some(CronField::Hour),
        "invalid cron `0 24 * * *`: hour field value `24` is out of range; allowed 0-23",
    );
    assert_refused(
        "60 * * * *",
        Some(CronField::Minute),
        "invalid cron `60 * * * *`: minute field value `60` is out of range; allowed 0-59",
    );
    assert_refused(
        "0 0 32 * *",
        Some(CronField::DayOfMonth),
        "invalid cron `0 0 32 * *`: day-of-month field value `32` is out of range; allowed 1-31",
    );
    assert_refused(
        "0 0 * 13 *",
        Some(CronField::Month),
        "invalid cron `0 0 * 13 *`: month field value `13` is out of range; allowed 1-12 or JAN-DEC",
    );
    assert_refused(
        "0 0 * * 8",
        Some(CronField::DayOfWeek),
        "invalid cron `0 0 * * 8`: day-of-week field value `8` is out of range; \
         allowed 0-7 or SUN-SAT (0 and 7 are Sunday)",
    );
    assert_refused(
        "61 0 0 * * *",
        Some(CronField::Second),
        "invalid cron `61 0 0 * * *`: second field value `61` is out of range; allowed 0-59",
    );
    assert_refused(
        "0 1-99 * * *",
        Some(CronField::Hour),
        "invalid cron `0 1-99 * * *`: hour field value `99` is out of range; allowed 0-23",
    );
}

#[test]
fn reversed_ranges_get_a_rewrite() {
    assert_refused(
        "0 22-2 * * *",
        Some(CronField::Hour),
        "invalid cron `0 22-2 * * *`: hour field value `22-2` is a reversed range; \
         allowed ranges from low to high; write `22-23,0-2` to wrap around",
    );
    let (message, field) = refusal("0 0 * * FRI-MON");
    assert_eq!(field, Some(CronField::DayOfWeek));
    assert!(
        message.contains("`FRI-MON` is a reversed range"),
        "{message}"
    );
    assert!(message.contains("write `FRI-SAT,SUN-MON`"), "{message}");
    let (message, _) = refusal("0 0 * NOV-FEB *");
    assert!(message.contains("write `NOV-DEC,JAN-FEB`"), "{message}");
}

#[test]
fn sunday_as_the_end_of_a_day_of_week_range_is_the_crontab_idiom() {
    for expression in [
        "0 0 * * FRI-SUN",
        "0 0 * * 5-0",
        "0 0 * * 5-7",
        "0 0 * * fri-sun",
    ] {
        let spec = ScheduleSpec::parse(expression, "UTC").unwrap();
        // 2026-01-01 is a Thursday: Friday, Saturday, Sunday, then Friday again.
        let after = "2026-01-01T00:00:00Z".parse().unwrap();
        let days: Vec<String> = spec
            .iter_after(after)
            .take(4)
            .map(|fire| fire.format("%a").to_string())
            .collect();
        assert_eq!(days, ["Fri", "Sat", "Sun", "Fri"], "{expression}");
    }
}

#[test]
fn names_only_in_their_own_field() {
    assert_refused(
        "0 0 * * JAN",
        Some(CronField::DayOfWeek),
        "invalid cron `0 0 * * JAN`: day-of-week field value `JAN` is a month name; \
         allowed 0-7 or SUN-SAT (0 and 7 are Sunday)",
    );
    assert_refused(
        "0 0 * MON *",
        Some(CronField::Month),
        "invalid cron `0 0 * MON *`: month field value `MON` is a day name; allowed 1-12 or JAN-DEC",
    );
    assert_refused(
        "0 JAN * * *",
        Some(CronField::Hour),
        "invalid cron `0 JAN * * *`: hour field value `JAN` is a month name; allowed 0-23",
    );
    assert!(ScheduleSpec::parse("0 0 * jan,Jul mon-Fri", "UTC").is_ok());
}

#[test]
fn sloppy_syntax_is_refused() {
    assert_refused(
        "*/0 * * * *",
        Some(CronField::Minute),
        "invalid cron `*/0 * * * *`: minute field value `*/0` has step 0; allowed steps 1-59",
    );
    assert_refused(
        "1,,2 * * * *",
        Some(CronField::Minute),
        "invalid cron `1,,2 * * * *`: minute field value `1,,2` has an empty list item; \
         allowed a comma-separated list without empty items, such as `1,15`",
    );
    assert_refused(
        "/15 * * * *",
        Some(CronField::Minute),
        "invalid cron `/15 * * * *`: minute field value `/15` has a step without a start; \
         allowed `*/15` or a start such as `0/15`",
    );
    let (message, field) = refusal("0 0 ? * *");
    assert_eq!(field, Some(CronField::DayOfMonth));
    assert!(message.contains("uses `?`; allowed `*`"), "{message}");
    for expression in [
        "1, * * * *",
        ",1 * * * *",
        "*/ * * * *",
        "*/60 * * * *",
        "1-2-3 * * * *",
        "1/2/3 * * * *",
        "x * * * *",
        "-1 * * * *",
        "0 0 * * L",
        "0 0 * * 5#6",
        "0 0 1L * *",
        "0 0 * * 1+2",
        "0 0 * * +",
    ] {
        let (_, field) = refusal(expression);
        assert!(field.is_some(), "`{expression}` should name a field");
    }
}

#[test]
fn field_count_and_aliases() {
    assert_refused(
        "* * * *",
        None,
        "invalid cron `* * * *`: expected 5 fields (minute hour day-of-month month day-of-week) \
         or 6 with a leading second field, found 4",
    );
    let (message, _) = refusal("0 0 0 1 1 * 2030");
    assert!(
        message.ends_with("found 7; a year field is not supported"),
        "{message}"
    );
    let (message, _) = refusal("@reboot");
    assert!(message.contains("`@reboot` is not a schedule"), "{message}");
    assert!(message.contains("allowed @hourly @daily"), "{message}");
    let (message, _) = refusal("@fortnightly");
    assert!(
        message.contains("unknown alias `@fortnightly`"),
        "{message}"
    );
    for alias in [
        "@hourly",
        "@daily",
        "@midnight",
        "@weekly",
        "@monthly",
        "@yearly",
        "@annually",
        "@DAILY",
    ] {
        assert!(ScheduleSpec::parse(alias, "UTC").is_ok(), "{alias}");
    }
}

#[test]
fn expressions_that_never_fire_are_refused() {
    assert_refused(
        "0 0 31 2 *",
        Some(CronField::DayOfMonth),
        "invalid cron `0 0 31 2 *`: day-of-month field value `31` never occurs in month `2`, so \
         the schedule would never fire; allowed a day that exists in one of the months \
         (29 February is fine: it fires in leap years)",
    );
    for expression in [
        "0 0 30 2 *",
        "0 0 31 4,6,9,11 *",
        "0 0 30W 2 *",
        "0 0 1 * +FRI#2",
    ] {
        refusal(expression);
    }
    for expression in [
        "0 0 29 2 *",
        "0 0 31 2,3 *",
        "0 0 L 2 *",
        "0 0 31 2 MON",
        "0 0 29 2 +MON",
    ] {
        assert!(
            ScheduleSpec::parse(expression, "UTC").is_ok(),
            "{expression}"
        );
    }
}

#[test]
fn unknown_time_zone_is_refused_clearly() {
    let error = ScheduleSpec::parse("* * * * *", "Europe/Londres").unwrap_err();
    assert_eq!(error.field(), None);
    assert!(
        error
            .to_string()
            .starts_with("unknown time zone `Europe/Londres`; allowed an IANA zone name"),
        "{error}"
    );
}

#[test]
fn fixed_time_unless_the_minute_or_hour_field_starts_with_a_star() {
    let fixed = |expression: &str| {
        ScheduleSpec::parse(expression, "UTC")
            .unwrap()
            .is_fixed_time()
    };
    assert!(fixed("30 2 * * *"));
    assert!(fixed("0 9,17 * * *"));
    assert!(fixed("0 1-3 * * *"));
    assert!(fixed("0,30 2 * * *"));
    assert!(fixed("15 2 * * *"));
    // cronie looks at the field's first character, not at whether it has a step.
    assert!(fixed("0 1-10/3 * * *"));
    assert!(fixed("0-59/10 2 * * *"));
    assert!(fixed("@daily"));
    assert!(fixed("@midnight"));
    assert!(fixed("@weekly"));
    assert!(fixed("@monthly"));
    assert!(fixed("@yearly"));

    assert!(!fixed("*/20 1 * * *"));
    assert!(!fixed("*/10 2 * * *"));
    assert!(!fixed("* 2 * * *"));
    assert!(!fixed("0 * * * *"));
    assert!(!fixed("*/30 * * * *"));
    assert!(!fixed("0 */2 * * *"));
    assert!(!fixed("@hourly"));

    // The seconds field plays no part: only minute and hour decide.
    assert!(fixed("*/10 30 2 * * *"));
    assert!(fixed("* 0 9 * * *"));
    assert!(!fixed("0 */10 2 * * *"));
    assert!(!fixed("0 0 * * * *"));
}

#[track_caller]
fn assert_fires(expression: &str, zone: &str, after: &str, expected: &[&str]) {
    let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
    let spec = ScheduleSpec::parse(expression, zone).unwrap();
    let fires: Vec<DateTime<Utc>> = spec.iter_after(at(after)).take(expected.len()).collect();
    let expected: Vec<DateTime<Utc>> = expected.iter().map(|s| at(s)).collect();
    assert_eq!(fires, expected, "`{expression}` in {zone} after {after}");
}

/// Asked from the second half of a repeated range, a fixed-time job still runs at its times
/// that come after the range, right after it. Expected instants from
/// `tests/data/cron_reference.py`.
#[test]
fn fixed_time_job_asked_from_the_second_half_of_a_repeated_range() {
    // Lord Howe, 2026-04-05: 02:00 LHDT (+11:00, 15:00Z) goes back to 01:30 LHST (+10:30), so
    // 01:30-01:59 happens twice and 02:00 LHST is 15:30Z.
    let lord_howe = "Australia/Lord_Howe";
    assert_fires(
        "0 2 * * *",
        lord_howe,
        "2026-04-04T15:00:00Z",
        &["2026-04-04T15:30:00Z", "2026-04-05T15:30:00Z"],
    );
    assert_fires(
        "15 2 * * *",
        lord_howe,
        "2026-04-04T15:20:00Z",
        &["2026-04-04T15:45:00Z", "2026-04-05T15:45:00Z"],
    );
    assert_fires(
        "10 1-3 * * *",
        lord_howe,
        "2026-04-04T15:10:00Z",
        &["2026-04-04T15:40:00Z", "2026-04-04T16:40:00Z"],
    );
    // The same in a whole-hour zone: New York repeats 01:00-01:59 on 2026-11-01.
    assert_fires(
        "0 2 * * *",
        "America/New_York",
        "2026-11-01T06:00:00Z",
        &["2026-11-01T07:00:00Z", "2026-11-02T07:00:00Z"],
    );
    assert_fires(
        "0,20,40 1,2 * * *",
        "America/New_York",
        "2026-11-01T06:10:00Z",
        &[
            "2026-11-01T07:00:00Z",
            "2026-11-01T07:20:00Z",
            "2026-11-01T07:40:00Z",
        ],
    );
}

#[test]
fn vixie_day_rule() {
    let days = |expression: &str| -> Vec<u32> {
        use chrono::Datelike;
        let spec = ScheduleSpec::parse(expression, "UTC").unwrap();
        let after = "2026-01-31T00:00:00Z".parse().unwrap();
        spec.iter_after(after)
            .take(5)
            .map(|fire| fire.day())
            .collect()
    };
    // February 2026: Mondays are 2, 9, 16, 23.
    assert_eq!(days("0 0 10 2 1"), [2, 9, 10, 16, 23]); // either
    // A day of month starting with `*` counts as unrestricted: both (odd Mondays in February).
    assert_eq!(days("0 0 */2 2 1"), [9, 23, 1, 15, 7]);
    assert_eq!(days("0 0 * 2 1"), [2, 9, 16, 23, 1]);
}

/// What croner does on its own, pinned so that an upgrade that changes it is noticed; each is
/// a reason for `normalize.rs` or `next.rs` (see the module docs).
mod croner_alone {
    use std::str::FromStr;

    use chrono::{DateTime, NaiveDate, TimeZone, Utc};
    use croner::Cron;

    #[test]
    fn accepts_what_we_refuse() {
        for expression in [
            "0 0 * * JAN",
            "1,,2 * * * *",
            "0 0 ? * *",
            "0 0 0 1 1 * 2030",
            "0 0 31 2 *",
        ] {
            assert!(
                Cron::from_str(expression).is_ok(),
                "croner now refuses `{expression}`"
            );
        }
        // `JAN` in the day of week is read as 1, Monday.
        let monday = NaiveDate::from_ymd_opt(2026, 1, 5)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap();
        assert!(
            Cron::from_str("0 0 * * JAN")
                .unwrap()
                .is_time_matching(&monday)
                .unwrap()
        );
    }

    #[test]
    fn errors_name_no_field() {
        let error = Cron::from_str("0 24 * * *").unwrap_err().to_string();
        assert!(
            !error.contains("hour"),
            "croner now names the field: {error}"
        );
    }

    #[test]
    fn only_an_exact_star_makes_a_day_field_unrestricted() {
        // Vixie: `*/2` counts as unrestricted, so this is odd days AND Mondays. croner ORs.
        let cron = Cron::from_str("0 0 */2 * 1").unwrap();
        let even_monday = NaiveDate::from_ymd_opt(2026, 2, 2)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap();
        assert!(cron.is_time_matching(&even_monday).unwrap());
    }

    #[test]
    fn runs_a_job_with_two_fixed_hours_twice_in_a_repeated_hour() {
        // croner's fixed-time test wants a single hour; ours (cronie's) looks at whether the
        // minute or hour field starts with `*`.
        let zone: chrono_tz::Tz = "America/New_York".parse().unwrap();
        let after = zone.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
        let cron = Cron::from_str("30 1,13 * * *").unwrap();
        let fires: Vec<DateTime<Utc>> = cron
            .iter_after(after)
            .take(2)
            .map(|fire| fire.to_utc())
            .collect();
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        assert_eq!(
            fires,
            [at("2026-11-01T05:30:00Z"), at("2026-11-01T06:30:00Z")]
        );

        let ours = super::ScheduleSpec::parse("30 1,13 * * *", "America/New_York").unwrap();
        let fires: Vec<DateTime<Utc>> = ours.iter_after(after.to_utc()).take(2).collect();
        assert_eq!(
            fires,
            [at("2026-11-01T05:30:00Z"), at("2026-11-01T18:30:00Z")]
        );
    }
}

#[test]
fn debug_shows_the_expression_not_croner_bitfields() {
    let spec = ScheduleSpec::parse("0 9 * * MON-FRI", "Europe/London").unwrap();
    assert_eq!(
        format!("{spec:?}"),
        r#"ScheduleSpec { expression: "0 9 * * MON-FRI", timezone: Europe/London, fixed_time: true }"#
    );
}
