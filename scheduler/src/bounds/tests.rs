use super::*;

#[test]
fn durations_outside_their_range_are_refused_naming_field_and_range() {
    let e = SLA_WARN_AFTER
        .parse("sla.warn_after", "500000000000years")
        .unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("`sla.warn_after`: "), "{text}");
    assert!(text.contains("out of range"), "{text}");
    assert!(text.contains("from 1ms to 1year"), "{text}");
    assert_eq!(
        SLA_WARN_AFTER.parse("sla.warn_after", " 10m ").unwrap(),
        secs(600)
    );
    let e = DELIVERY_TIMEOUT.parse("timeout", "0s").unwrap_err();
    assert!(e.to_string().contains("0s is out of range"), "{e}");
}

#[test]
fn long_or_hostile_text_is_refused_before_parsing_and_quoted_printably() {
    let long = "1s ".repeat(1000);
    let e = SLA_WARN_AFTER.parse("sla.warn_after", &long).unwrap_err();
    assert!(e.to_string().contains("is not read"), "{e}");
    let e = SLA_WARN_AFTER
        .parse("sla.warn_after", "\u{1b}[2Jsoon")
        .unwrap_err();
    assert!(!e.to_string().contains('\u{1b}'), "{e}");
    assert!(e.to_string().contains("\\u{1b}[2Jsoon"), "{e}");
}

#[test]
fn counts_and_millis() {
    assert_eq!(SLA_ALERT_AFTER_FAILURES.check("n", 3u32).unwrap(), 3);
    assert!(SLA_ALERT_AFTER_FAILURES.check("n", 0u32).is_err());
    assert!(SLA_ALERT_AFTER_FAILURES.check("n", -1i64).is_err());
    let e = BACKFILL_PACE
        .check_millis("pace_ms", 10_000_000_000_000_000)
        .unwrap_err();
    assert!(e.to_string().starts_with("`pace_ms`: "), "{e}");
    assert_eq!(BACKFILL_PACE.check_millis("pace_ms", 0).unwrap(), ms(0));
}

#[test]
fn every_range_is_far_from_overflowing_time_arithmetic() {
    let now = chrono::Utc::now();
    for (name, range) in ALL {
        if let Range::Duration(r) = range {
            let max = chrono::TimeDelta::from_std(r.max).expect(name);
            assert!(now.checked_add_signed(max * 100).is_some(), "{name}");
            assert!(
                std::time::Instant::now().checked_add(r.max * 100).is_some(),
                "{name}"
            );
        }
    }
}

#[test]
fn the_stores_sql_caps_are_the_ranges_maxima() {
    for (sql, range) in [
        (
            include_str!("../store/postgres/queries/backfill_claimed.sql"),
            BACKFILL_PACE,
        ),
        (
            include_str!("../store/sqlite/queries/backfill_next.sql"),
            BACKFILL_PACE,
        ),
        (
            include_str!("../store/postgres/queries/incident_remind.sql"),
            SLA_REMIND_EVERY,
        ),
        (
            include_str!("../store/sqlite/queries/incident_remind.sql"),
            SLA_REMIND_EVERY,
        ),
    ] {
        let cap = range.max_millis().to_string();
        assert!(sql.contains(&cap), "{cap} not in {sql}");
    }
    assert_eq!(BACKFILL_PACE.capped_millis(secs(u64::MAX)), 86_400_000);
    assert_eq!(SLA_REMIND_EVERY.capped_millis(ms(1)), 1);
}

#[test]
fn the_task_macro_checks_process_limits_with_these_numbers() {
    let macro_source = include_str!("../../../scheduler-macros/src/valid.rs");
    for (name, value) in [
        ("MIN_MEMORY_LIMIT", MEMORY_LIMIT.min),
        ("MAX_MEMORY_LIMIT", MEMORY_LIMIT.max),
        ("MIN_PROCESSES", MAX_PROCESSES.min),
        ("MAX_PROCESSES", MAX_PROCESSES.max),
        ("MIN_CPU_LIMIT", CPU_LIMIT.min.as_secs()),
        ("MAX_CPU_LIMIT", CPU_LIMIT.max.as_secs()),
        ("MIN_FILE_SIZE", MAX_FILE_SIZE.min),
        ("MAX_FILE_SIZE", MAX_FILE_SIZE.max),
    ] {
        let line = format!("const {name}: u64 = {value};");
        assert!(
            macro_source.contains(&line),
            "scheduler-macros/src/valid.rs lacks `{line}`"
        );
    }
    assert_eq!(size(64 << 20), "64 MiB");
    assert_eq!(size(1000), "1000 bytes");
}

#[test]
fn docs_limits_lists_every_range() {
    let page = include_str!("../../../docs/limits.md");
    for (name, range) in ALL {
        let row = format!("| {name} | {range} |");
        assert!(
            page.contains(&row),
            "docs/limits.md lacks the row `{row}` (write it as shown)"
        );
    }
}
