use chrono::TimeDelta;

use super::health::{count_failed_ticks, timeliness_of};
use super::*;
use crate::store::{Pause, RunRecord, RunStatus};

fn at(s: i64) -> DateTime<Utc> {
    "2026-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap() + TimeDelta::seconds(s)
}

fn state() -> TaskState {
    let mut s = TaskState::for_tests("t", "*/10 * * * * *");
    s.next_run_at = Some(at(10));
    s
}

#[test]
fn a_task_is_late_only_when_its_tick_is_past_its_grace_and_nothing_runs() {
    let s = state();
    let never = |_| false;
    let always = |_| true;
    assert_eq!(timeliness_of(&s, at(5), always), ("on_time", None));
    assert_eq!(timeliness_of(&s, at(12), never), ("due", Some(2.0)));
    assert_eq!(timeliness_of(&s, at(40), always), ("late", Some(30.0)));
    let mut running = s.clone();
    running.lock_owner = Some("n1".into());
    assert_eq!(
        timeliness_of(&running, at(14), always),
        ("waiting", Some(4.0)),
        "a tick due while a run of an earlier one runs waits for it: not late"
    );
    let mut paused = s.clone();
    paused.pause = Some(Pause::new(at(0), "ops", "checking", None));
    assert_eq!(timeliness_of(&paused, at(40), always), ("paused", None));
    let mut disabled = s;
    disabled.enabled = false;
    assert_eq!(timeliness_of(&disabled, at(40), always), ("off", None));
}

fn run(id: i64, tick: i64, status: RunStatus) -> RunRecord {
    RunRecord {
        finished_at: (status != RunStatus::Running).then(|| at(tick + 1)),
        status,
        ..RunRecord::example(id, "t", at(tick))
    }
}

#[test]
fn a_sharded_or_broadcast_task_runs_while_any_of_its_rows_is_locked() {
    let row = |name: &str, owner: Option<&str>| {
        let mut s = state();
        s.name = name.into();
        s.lock_owner = owner.map(Into::into);
        s.lock_expires_at = owner.map(|_| at(20));
        s
    };
    let states = vec![
        // Fixed shards: shard 0 idle, shards 1 and 2 running.
        row("s", None),
        row("s[1]", Some("a")),
        row("s[2]", Some("b")),
        // A broadcast: its own row is never locked, node b's row is.
        row("b", None),
        row("b[@a]", None),
        row("b[@b]", Some("b")),
        // An ordinary task, idle, and one running.
        row("idle", None),
        row("busy", Some("c")),
    ];
    let tasks: Vec<(String, Option<String>, u32)> = task_rows(states)
        .into_iter()
        .map(|(s, locked)| (s.name, s.lock_owner, locked))
        .collect();
    assert_eq!(
        tasks,
        [
            ("s".into(), Some("a".into()), 2),
            ("b".into(), Some("b".into()), 1),
            ("idle".into(), None, 0),
            ("busy".into(), Some("c".into()), 1),
        ]
    );
}

#[test]
fn failed_ticks_count_a_tick_and_its_retries_once() {
    // Newest first: a retry running, then two ticks of three failed attempts each, then a
    // success before them.
    let runs = [
        run(8, 30, RunStatus::Running),
        run(7, 20, RunStatus::Failed),
        run(6, 20, RunStatus::TimedOut),
        run(5, 20, RunStatus::Failed),
        run(4, 10, RunStatus::Failed),
        run(3, 10, RunStatus::Failed),
        run(2, 10, RunStatus::Failed),
        run(1, 0, RunStatus::Succeeded),
    ];
    let runs: Vec<&RunRecord> = runs.iter().collect();
    assert_eq!(count_failed_ticks(&runs, 6), (2, false));
    assert_eq!(
        count_failed_ticks(&runs, 4),
        (2, false),
        "part of a tick's attempts"
    );
    assert_eq!(
        count_failed_ticks(&runs[..4], 6),
        (1, true),
        "fewer runs read than failed: a lower bound"
    );
}
