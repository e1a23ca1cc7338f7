//! `scheduler next`, run as a built binary.

use std::process::{Command, Output};

fn scheduler(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scheduler"))
        .args(args)
        .output()
        .expect("the scheduler binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("utf-8 stderr")
}

#[test]
fn prints_fire_instants_in_utc_one_a_line() {
    let output = scheduler(&[
        "next",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-07T12:00:00Z",
        "--count",
        "3",
    ]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "2026-03-08T07:00:00Z\n2026-03-09T06:30:00Z\n2026-03-10T06:30:00Z\n"
    );
    assert_eq!(stderr(&output), "");
}

#[test]
fn after_is_exclusive_and_accepts_offsets() {
    // 09:00+01:00 is 08:00Z, itself a fire instant: the next one is an hour later.
    let output = scheduler(&[
        "next",
        "0 * * * *",
        "--after",
        "2026-01-01T09:00:00+01:00",
        "--count",
        "2",
    ]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "2026-01-01T09:00:00Z\n2026-01-01T10:00:00Z\n"
    );
}

#[test]
fn defaults_are_utc_now_and_five() {
    let before = chrono::Utc::now();
    let output = scheduler(&["next", "* * * * *"]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let lines: Vec<chrono::DateTime<chrono::Utc>> = stdout(&output)
        .lines()
        .map(|line| {
            assert!(line.ends_with('Z'), "{line}");
            line.parse().expect("RFC 3339")
        })
        .collect();
    assert_eq!(lines.len(), 5);
    assert!(lines[0] > before - chrono::Duration::minutes(1));
    assert!(lines[0] <= before + chrono::Duration::minutes(2));
    assert!(
        lines
            .windows(2)
            .all(|pair| pair[1] - pair[0] == chrono::Duration::minutes(1))
    );
}

#[test]
fn six_fields_and_aliases() {
    let output = scheduler(&[
        "next",
        "0 */5 * * * *",
        "--after",
        "2026-01-01T00:00:00Z",
        "--count",
        "2",
    ]);
    assert_eq!(
        stdout(&output),
        "2026-01-01T00:05:00Z\n2026-01-01T00:10:00Z\n"
    );
    let output = scheduler(&[
        "next",
        "@weekly",
        "--tz",
        "America/New_York",
        "--after",
        "2026-01-01T00:00:00Z",
        "--count",
        "1",
    ]);
    assert_eq!(stdout(&output), "2026-01-04T05:00:00Z\n");
}

#[test]
fn invalid_expression_fails_with_the_message_on_stderr_only() {
    let output = scheduler(&["next", "0 24 * * *", "--after", "2026-01-01T00:00:00Z"]);
    assert!(!output.status.success());
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        "error: invalid cron `0 24 * * *`: hour field value `24` is out of range; allowed 0-23\n"
    );
}

#[test]
fn unknown_zone_fails() {
    let output = scheduler(&["next", "0 0 * * *", "--tz", "Mars/Olympus_Mons"]);
    assert!(!output.status.success());
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("unknown time zone `Mars/Olympus_Mons`"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn bad_arguments_fail() {
    for args in [
        &["next", "0 0 * * *", "--after", "yesterday"][..],
        &["next", "0 0 * * *", "--count", "0"][..],
        &["next", "0 0 * * *", "--count", "many"][..],
        &["next"][..],
        &["next", "0 0 31 2 *"][..],
        &["next", "@reboot"][..],
    ] {
        let output = scheduler(args);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert_eq!(stdout(&output), "", "{args:?} printed to stdout");
        assert!(!stderr(&output).is_empty(), "{args:?} gave no error");
    }
    let output = scheduler(&["next", "0 0 * * *", "--after", "yesterday"]);
    assert!(
        stderr(&output).contains("`yesterday` is not an RFC 3339 instant"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_calendar_of_a_config_document_skips_or_moves_blocked_ticks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.yaml");
    std::fs::write(
        &path,
        "calendars:\n  holidays: {dates: ['2026-03-09']}\n  lunch: {weekly: [{days: [mon-fri], from: '12:00', to: '13:00'}]}\ntasks: []\n",
    )
    .unwrap();
    let config = path.to_str().unwrap();
    // New York: 02:30 is in the gap on the 8th (03:00 EDT), the 9th is a holiday.
    let output = scheduler(&[
        "next",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-07T12:00:00Z",
        "--count",
        "2",
        "--config",
        config,
        "--calendar",
        "holidays",
    ]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "2026-03-08T07:00:00Z\n2026-03-10T06:30:00Z\n"
    );
    // Every 20 minutes, lunch moved to its end and folded into one.
    let output = scheduler(&[
        "next",
        "*/20 * * * *",
        "--after",
        "2026-03-09T11:30:00Z",
        "--count",
        "3",
        "--config",
        config,
        "--calendar",
        "lunch",
        "--on-blocked",
        "next_allowed",
    ]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "2026-03-09T11:40:00Z\n2026-03-09T13:00:00Z\n2026-03-09T13:20:00Z\n"
    );
    let output = scheduler(&[
        "next",
        "* * * * *",
        "--config",
        config,
        "--calendar",
        "nope",
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("calendar `nope` is not in"),
        "{}",
        stderr(&output)
    );
}
