use super::*;

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn hourly() -> ScheduleSpec {
    ScheduleSpec::parse("0 0 * * * *", "UTC").unwrap()
}

/// The hash is fixed: these values hold on every node and in every version (computed apart, in
/// Python, from the module's description). A change here moves every pending start of every
/// jittered task.
#[test]
fn the_hash_is_fixed() {
    let tick = at("2026-12-07T00:00:00Z");
    assert_eq!(stable_hash("", "", DateTime::UNIX_EPOCH), GOLDEN[0]);
    assert_eq!(stable_hash("syncAdvertiserReport", "", tick), GOLDEN[1]);
    assert_eq!(
        stable_hash("syncAdvertiserReport", "tenant-42", tick),
        GOLDEN[2]
    );
    assert_eq!(
        offset(
            "syncAdvertiserReport",
            "tenant-42",
            tick,
            Duration::from_secs(30)
        ),
        Duration::from_millis(10_771)
    );
}

const GOLDEN: [u64; 3] = [
    6_195_296_373_791_733_044,
    13_339_792_095_844_577_731,
    3_168_237_659_413_930_771,
];

#[test]
fn an_offset_is_the_same_each_time_and_inside_its_window() {
    let tick = at("2026-12-07T00:00:00Z");
    let window = Duration::from_secs(30);
    for i in 0..1_000 {
        let key = format!("tenant-{i}");
        let a = offset("sync", &key, tick, window);
        assert_eq!(a, offset("sync", &key, tick, window), "deterministic");
        assert!(a < window, "{a:?} inside {window:?}");
        assert_eq!(a.subsec_nanos() % 1_000_000, 0, "whole milliseconds");
    }
    assert_eq!(offset("sync", "k", tick, Duration::ZERO), Duration::ZERO);
    assert_eq!(
        offset("sync", "k", tick, Duration::from_micros(999)),
        Duration::ZERO,
        "below a millisecond: none"
    );
}

/// 10,000 keys over a 30 s window fall evenly into ten 3 s buckets (each within a fifth of the
/// mean), and the three parts of the identity each move the offset.
#[test]
fn offsets_spread_over_the_window() {
    let tick = at("2026-12-07T00:00:00Z");
    let window = Duration::from_secs(30);
    let mut buckets = [0u32; 10];
    for i in 0..10_000 {
        let o = offset("sync", &format!("tenant-{i}"), tick, window);
        buckets[(o.as_millis() / 3_000) as usize] += 1;
    }
    for (i, n) in buckets.iter().enumerate() {
        assert!((800..=1_200).contains(n), "bucket {i}: {n} of 10,000");
    }
    let base = offset("sync", "tenant-1", tick, window);
    assert_ne!(base, offset("sync", "tenant-2", tick, window), "key");
    assert_ne!(base, offset("other", "tenant-1", tick, window), "task");
    assert_ne!(
        base,
        offset("sync", "tenant-1", tick + TimeDelta::hours(1), window),
        "tick"
    );
    assert_ne!(
        offset("a", "bc", tick, window),
        offset("ab", "c", tick, window),
        "fields are separated"
    );
}

#[test]
fn a_start_stays_before_the_next_tick() {
    let every_second = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
    let tick = at("2026-12-07T00:00:00Z");
    for i in 0..200 {
        let row = format!("sync/tenant-{i}");
        let start = start_of(&row, &every_second, tick, Duration::from_secs(30));
        assert!(
            start >= tick && start < tick + TimeDelta::seconds(1),
            "{start}"
        );
        let start = start_of(&row, &hourly(), tick, Duration::from_secs(30));
        assert!(
            start >= tick && start < tick + TimeDelta::seconds(30),
            "{start}"
        );
    }
    assert_eq!(start_of("sync", &hourly(), tick, Duration::ZERO), tick);
}

#[test]
fn rows_hash_as_their_task_and_key() {
    assert_eq!(identity("sync"), ("sync", ""));
    assert_eq!(identity("sync/tenant-42"), ("sync", "tenant-42"));
    assert_eq!(identity("sync[3]"), ("sync", ""));
    let tick = at("2026-12-07T00:00:00Z");
    let w = Duration::from_secs(30);
    assert_eq!(
        start_of("sync[3]", &hourly(), tick, w),
        start_of("sync", &hourly(), tick, w),
        "a tick's shards start together"
    );
}

#[test]
fn the_next_run_keeps_the_tick_beside_its_start() {
    let tick = at("2026-12-07T00:00:00Z");
    assert_eq!(
        next_run("sync", &hourly(), Some(tick), Duration::ZERO),
        NextRun::Set(Some(tick))
    );
    assert_eq!(
        next_run("sync", &hourly(), None, Duration::from_secs(30)),
        NextRun::Set(None)
    );
    let NextRun::Shifted { tick: t, start } = next_run(
        "sync/tenant-1",
        &hourly(),
        Some(tick),
        Duration::from_secs(30),
    ) else {
        panic!("a window shifts the start");
    };
    assert_eq!(t, tick);
    assert!(start > tick);
}

#[test]
fn the_window_is_the_rows_own_else_the_configs_else_the_attributes() {
    let s = Duration::from_secs;
    assert_eq!(window(Some(s(1)), Some(s(2)), Some(s(3))), s(1));
    assert_eq!(window(None, Some(s(2)), Some(s(3))), s(2));
    assert_eq!(window(None, None, Some(s(3))), s(3));
    assert_eq!(window(None, None, None), Duration::ZERO);
    assert_eq!(
        window(Some(Duration::ZERO), None, Some(s(3))),
        Duration::ZERO,
        "own zero: none"
    );
}
