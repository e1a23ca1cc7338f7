use chrono::Utc;

use super::*;

#[test]
fn runs_and_skips_are_counted_per_task_in_prometheus_names() {
    let m = Metrics::new();
    let now = Utc::now();
    m.run_started("sync", now, "schedule", now);
    m.run_ended("sync", "succeeded", "schedule", 0.2, true, now);
    m.ticks_skipped("sync", "overlap", 3);
    let text = m.encode();
    assert!(
        text.contains(
            r#"scheduler_task_runs_total{task="sync",outcome="succeeded",trigger="schedule"} 1"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"scheduler_task_ticks_skipped_total{task="sync",reason="overlap"} 3"#));
    assert!(text.contains(r#"scheduler_task_running{task="sync"} 0"#));
    assert!(text.contains("scheduler_task_run_duration_seconds_count"));
    assert!(text.contains(r#"scheduler_build_info{version=""#));
}

/// 10,000 tenants of one task are one task's series, not 10,000 (each a few histograms): an
/// instance's runs count under its task; the per-row gauges (next run, missed) are the task's
/// own row's.
#[test]
fn instances_count_under_their_task_and_add_no_series() {
    let m = Metrics::new();
    let now = Utc::now();
    for key in ["tenant-1", "tenant-2"] {
        let row = crate::instance::row_name("sync", key);
        m.run_started(&row, now, "schedule", now);
        m.run_ended(&row, "succeeded", "schedule", 0.2, true, now);
        m.ticks_skipped(&row, "overlap", 1);
        m.next_run(&row, Some(now));
        m.missed(&row, true);
    }
    let text = m.encode();
    assert!(!text.contains("tenant-"), "{text}");
    assert!(
        text.contains(
            r#"scheduler_task_runs_total{task="sync",outcome="succeeded",trigger="schedule"} 2"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"scheduler_task_ticks_skipped_total{task="sync",reason="overlap"} 2"#));
    assert!(text.contains(r#"scheduler_task_running{task="sync"} 0"#));
    assert!(
        !text.contains("scheduler_task_next_run_timestamp_seconds{"),
        "{text}"
    );
    assert!(
        !text.contains(r#"scheduler_task_missed{task="sync"}"#),
        "{text}"
    );
}

/// One server shown at a time; the failovers counted.
#[test]
fn the_database_server_is_one_series_that_moves() {
    let m = Metrics::new();
    m.database_server("h1:5432");
    m.database_server("h1:5432");
    m.database_server("h2:5432");
    m.failed_over(1);
    let text = m.encode();
    assert!(
        text.contains(r#"scheduler_database_server_info{server="h2:5432"} 1"#),
        "{text}"
    );
    assert!(!text.contains("h1:5432"), "{text}");
    assert!(
        text.contains("scheduler_database_failovers_total 1"),
        "{text}"
    );
}

/// Every `scheduler_*` name in the example alert rules is one this registry exports.
#[test]
fn the_example_alert_rules_use_existing_metrics() {
    let rules = include_str!("../../../docs/alerts.yml");
    // A family shows in the exposition once it has a sample: give each one.
    let m = Metrics::new();
    let now = Utc::now();
    m.run_started("t", now, "schedule", now);
    m.run_ended("t", "succeeded", "schedule", 0.1, true, now);
    m.ticks_skipped("t", "overlap", 1);
    m.next_run("t", Some(now));
    m.missed("t", false);
    m.webhook_delivery("delivered");
    m.renewal(true);
    m.lock_lost(true);
    m.reconcile("applied", 0);
    m.config_read_error();
    m.service_panicked("sla");
    m.failed_over(1);
    m.database_server("db1:5432");
    let text = m.encode();
    let exported: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut used = 0;
    for word in rules.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if !word.starts_with("scheduler_") || word == "scheduler_" {
            continue;
        }
        used += 1;
        // Counters are declared without the `_total` their samples carry.
        let family = word.strip_suffix("_total").unwrap_or(word);
        assert!(
            exported.contains(family),
            "docs/alerts.yml uses `{word}`, which is not exported; exported: {exported:?}"
        );
    }
    assert!(used >= 10, "the rules name the metrics they use");
}
