//! The command line of an application built on `scheduler::run()` (the `test_node` binary):
//! `check-config` and `next`, run as a real process. No database is involved.

use std::process::Command;

fn app(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_test_node"))
        .args(args)
        .env_remove("DATABASE_URL")
        .output()
        .expect("run the application binary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn write_config(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("scheduler-cli-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_config_lists_every_problem_and_fails() {
    let path = write_config(
        "tasks.json",
        r#"{"tasks":[
            {"name":"kill.slow","enabled":true,"cron":"0 9 * * MON-FRI","timezone":"Asia/Shanghai"},
            {"name":"no.such.task","enabled":true,"cron":"* * * * *"},
            {"name":"kill.slow","enabled":true,"cron":"0 24 * * *"}
        ]}"#,
    );
    let (code, stdout, _) = app(&["check-config", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("no.such.task"), "{stdout}");
    assert!(stdout.contains("kill.slow"), "{stdout}");
    assert!(
        stdout.contains("2 times") || stdout.contains("twice") || stdout.contains("duplicate"),
        "{stdout}"
    );
}

#[test]
fn check_config_passes_a_good_file_and_shows_next_fire_times() {
    let path = write_config(
        "tasks.toml",
        "[[tasks]]\nname = \"kill.slow\"\nenabled = true\ncron = \"0 9 * * MON-FRI\"\ntimezone = \"Asia/Shanghai\"\n",
    );
    let (code, stdout, stderr) = app(&["check-config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("kill.slow"), "{stdout}");
    // 09:00 in Shanghai is 01:00 UTC; three fire times are listed.
    assert_eq!(stdout.matches("T01:00:00Z").count(), 3, "{stdout}");
}

#[test]
fn check_config_shows_a_broadcast_and_refuses_a_bad_shard_count() {
    let path = write_config(
        "tasks.yaml",
        "tasks:\n\
         - {name: bcast.work, enabled: true, cron: '* * * * * *', shards: nodes}\n\
         - {name: shard.work, enabled: true, cron: '* * * * * *', shards: 4}\n\
         - {name: kill.slow, enabled: true, cron: '* * * * * *', shards: all}\n\
         - {name: kill.never, enabled: true, cron: '* * * * * *', shards: 0}\n",
    );
    let (code, stdout, _) = app(&["check-config", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("task `bcast.work`: enabled, cron `* * * * * *`, zone UTC, broadcast (one run on each live node)"),
        "{stdout}"
    );
    assert!(stdout.contains(", 4 shards"), "{stdout}");
    for (task, shown) in [("kill.slow", "all"), ("kill.never", "0")] {
        let line = format!(
            "error: task `{task}`: `shards` must be a count from 1 to 1000 or `nodes` (one run on each live node), not `{shown}`"
        );
        assert!(stdout.contains(&line), "{line}\n{stdout}");
    }
}

#[test]
fn check_config_of_a_malformed_file_fails_with_its_position() {
    let path = write_config(
        "tasks.json",
        "{\"tasks\":[{\"name\":\"kill.slow\",\"enable\":true}]}",
    );
    let (code, stdout, _) = app(&["check-config", path.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains("enable"),
        "the unknown field is named: {stdout}"
    );
    assert!(stdout.contains("line 1"), "the position is given: {stdout}");
}

#[test]
fn next_previews_a_schedule_and_refuses_bad_input() {
    let (code, stdout, _) = app(&[
        "next",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-07T12:00:00Z",
        "--count",
        "2",
    ]);
    assert_eq!(code, 0);
    assert_eq!(stdout, "2026-03-08T07:00:00Z\n2026-03-09T06:30:00Z\n");
    let (code, stdout, stderr) = app(&["next", "0 22-2 * * *"]);
    assert_ne!(code, 0);
    assert!(stdout.is_empty());
    assert!(stderr.contains("hour"), "{stderr}");
}

#[test]
fn an_unknown_database_url_is_a_clear_error_without_its_password() {
    let out = Command::new(env!("CARGO_BIN_EXE_test_node"))
        .env("SCHEDULER_DATABASE_URL", "mysql://app:hunter2@db/jobs")
        .output()
        .expect("run the application binary");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr.contains("postgres://"), "{stderr}");
    assert!(stderr.contains("sqlite://"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(!stderr.contains("Setup {"), "no struct dump: {stderr}");
}

/// `check-config` reads the channels file (`SCHEDULER_CHANNELS_FILE`, or `--channels`) as the
/// node does: a `kind = "teams"` channel fails the check with the very error the node refuses
/// to start with.
#[test]
fn check_config_refuses_a_channels_file_the_node_refuses_with_the_node_s_message() {
    let config = write_config(
        "tasks.toml",
        "[[tasks]]\nname = \"kill.slow\"\nenabled = true\ncron = \"0 9 * * MON-FRI\"\n",
    );
    let channels = write_config(
        "channels.toml",
        "[[channels]]\nname = \"ops\"\nkind = \"teams\"\nurl = \"https://example.webhook.office.com/webhookb2/SecretPath\"\n",
    );
    let refused = "channel `ops`: unknown kind `teams`; the kinds are webhook, slack, feishu, dingtalk, wecom, email";
    // The node, configured through the environment, refuses to start.
    let db = channels.with_file_name("node.db");
    let node = Command::new(env!("CARGO_BIN_EXE_test_node"))
        .env("DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("SCHEDULER_CHANNELS_FILE", &channels)
        .output()
        .expect("run the application binary");
    let node_said = String::from_utf8_lossy(&node.stderr).into_owned();
    assert!(!node.status.success(), "{node_said}");
    assert!(node_said.contains(refused), "{node_said}");
    assert!(node_said.contains("SCHEDULER_CHANNELS_FILE"), "{node_said}");
    // check-config, by flag and by the same variable, says the same and fails.
    for args in [
        vec![
            "check-config",
            config.to_str().unwrap(),
            "--channels",
            channels.to_str().unwrap(),
        ],
        vec!["check-config", config.to_str().unwrap()],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_test_node"))
            .args(&args)
            .env_remove("DATABASE_URL")
            .env("SCHEDULER_CHANNELS_FILE", &channels)
            .output()
            .expect("run the application binary");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stdout}");
        assert!(
            stdout.contains("invalid setting `SCHEDULER_CHANNELS_FILE`"),
            "{stdout}"
        );
        assert!(stdout.contains(refused), "{stdout}");
        assert!(!stdout.contains("SecretPath"), "{stdout}");
    }
    // A good channels file passes.
    std::fs::write(
        &channels,
        "[[channels]]\nname = \"ops\"\nkind = \"slack\"\nurl = \"https://hooks.slack.com/services/T/B/x\"\n",
    )
    .unwrap();
    let (code, stdout, _) = app(&[
        "check-config",
        config.to_str().unwrap(),
        "--channels",
        channels.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("ok, 1 channel(s)"), "{stdout}");
}
