use chrono::TimeDelta;

use super::*;

fn at(s: i64) -> DateTime<Utc> {
    "2026-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap() + TimeDelta::seconds(s)
}

fn spec(cron: &str) -> ScheduleSpec {
    ScheduleSpec::parse(cron, "UTC").unwrap()
}

/// A task every ten seconds with a 4 s window, and two instances: one with its own 6 s window
/// on another schedule, one taking the task's; a second task without jitter.
pub(crate) fn starts() -> RunStarts {
    let mut starts = RunStarts::default();
    starts.task("t", Some(spec("*/10 * * * * *")), Duration::from_secs(4));
    starts.instance(
        "t",
        "own",
        Some((spec("5/10 * * * * *"), Some(Duration::from_secs(6)))),
    );
    starts.instance("t", "inherits", Some((spec("*/10 * * * * *"), None)));
    starts.instance("t", "gone", None);
    starts.task("plain", Some(spec("*/10 * * * * *")), Duration::ZERO);
    starts
}

pub(crate) fn run(task: &str, tick: i64, key: Option<&str>, trigger: Trigger) -> RunRecord {
    RunRecord {
        instance_key: key.map(str::to_owned),
        trigger,
        ..RunRecord::example(1, task, at(tick))
    }
}

/// A scheduled run is placed at its tick shifted by its row's window (the task's own row, an
/// instance with its own window, one with its task's), as the claim shifted it: the start the
/// dashboard's lateness counts from. A task without jitter starts at its tick. Retries, manual
/// and backfilled runs, and runs of a row or a task it cannot place, have none.
#[test]
fn a_scheduled_run_is_placed_at_its_ticks_start() {
    let starts = starts();
    let ten = spec("*/10 * * * * *");
    let own = crate::ticks::jitter::start_of("t", &ten, at(10), Duration::from_secs(4));
    assert!(own > at(10), "a shifted tick: {own}");
    assert_eq!(
        starts.start(&run("t", 10, None, Trigger::Schedule)),
        Some(own)
    );
    let shifted = crate::ticks::jitter::start_of(
        "t/own",
        &spec("5/10 * * * * *"),
        at(15),
        Duration::from_secs(6),
    );
    assert_eq!(
        starts.start(&run("t", 15, Some("own"), Trigger::Schedule)),
        Some(shifted)
    );
    let inherits =
        crate::ticks::jitter::start_of("t/inherits", &ten, at(10), Duration::from_secs(4));
    assert_eq!(
        starts.start(&run("t", 10, Some("inherits"), Trigger::Schedule)),
        Some(inherits)
    );
    assert_eq!(
        starts.start(&run("plain", 10, None, Trigger::Schedule)),
        Some(at(10))
    );
    for trigger in [Trigger::Retry, Trigger::Manual, Trigger::Backfill] {
        assert_eq!(
            starts.start(&run("t", 10, None, trigger)),
            None,
            "{trigger:?}"
        );
    }
    for key in ["gone", "unknown"] {
        assert_eq!(
            starts.start(&run("t", 10, Some(key), Trigger::Schedule)),
            None,
            "{key}"
        );
    }
    assert_eq!(
        starts.start(&run("other", 10, None, Trigger::Schedule)),
        None
    );
    assert!(starts.knows("t") && !starts.knows("other"));
    assert!(starts.knows_instance("t", "gone") && !starts.knows_instance("t", "unknown"));
}
