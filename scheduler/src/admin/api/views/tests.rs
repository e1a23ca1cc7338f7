use chrono::TimeDelta;

use super::*;

fn at(s: i64) -> DateTime<Utc> {
    "2026-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap() + TimeDelta::seconds(s)
}

fn spec(cron: &str) -> ScheduleSpec {
    ScheduleSpec::parse(cron, "UTC").unwrap()
}

/// A task every ten seconds with a 4 s window, and two instances: one with its own 6 s window
/// on another schedule, one taking the task's.
fn starts() -> RunStarts {
    let window = Duration::from_secs(4);
    let mut instances = HashMap::new();
    instances.insert(
        "own".to_owned(),
        Some((spec("5/10 * * * * *"), Duration::from_secs(6))),
    );
    instances.insert(
        "inherits".to_owned(),
        Some((spec("*/10 * * * * *"), window)),
    );
    instances.insert("gone".to_owned(), None);
    RunStarts {
        task: "t".into(),
        own: Some(spec("*/10 * * * * *")),
        window,
        instances,
    }
}

fn run(tick: i64, key: Option<&str>, trigger: Trigger) -> RunRecord {
    RunRecord {
        instance_key: key.map(str::to_owned),
        trigger,
        ..RunRecord::example(1, "t", at(tick))
    }
}

/// A scheduled run is placed at its tick shifted by its row's window (the task's own row, an
/// instance with its own window, one with its task's), as the claim shifted it: the start the
/// dashboard's lateness counts from. Retries, manual and backfilled runs, and runs of a row it
/// cannot place, have none. The view serializes it beside the tick.
#[test]
fn a_scheduled_run_is_placed_at_its_ticks_start() {
    let starts = starts();
    let ten = spec("*/10 * * * * *");
    let own = crate::ticks::jitter::start_of("t", &ten, at(10), Duration::from_secs(4));
    assert!(own > at(10), "a shifted tick: {own}");
    assert_eq!(starts.start(&run(10, None, Trigger::Schedule)), Some(own));
    let shifted = crate::ticks::jitter::start_of(
        "t/own",
        &spec("5/10 * * * * *"),
        at(15),
        Duration::from_secs(6),
    );
    assert_eq!(
        starts.start(&run(15, Some("own"), Trigger::Schedule)),
        Some(shifted)
    );
    let inherits =
        crate::ticks::jitter::start_of("t/inherits", &ten, at(10), Duration::from_secs(4));
    assert_eq!(
        starts.start(&run(10, Some("inherits"), Trigger::Schedule)),
        Some(inherits)
    );
    for trigger in [Trigger::Retry, Trigger::Manual, Trigger::Backfill] {
        assert_eq!(starts.start(&run(10, None, trigger)), None, "{trigger:?}");
    }
    assert_eq!(
        starts.start(&run(10, Some("gone"), Trigger::Schedule)),
        None
    );
    assert_eq!(
        starts.start(&run(10, Some("unknown"), Trigger::Schedule)),
        None
    );

    let view =
        serde_json::to_value(RunView::placed(run(10, None, Trigger::Schedule), &starts)).unwrap();
    assert_eq!(view["scheduled_at"], serde_json::json!(at(10)));
    assert_eq!(view["starts_at"], serde_json::json!(own));
    let manual =
        serde_json::to_value(RunView::placed(run(10, None, Trigger::Manual), &starts)).unwrap();
    assert!(manual.get("starts_at").is_none(), "{manual}");
}
