use super::pacing::{CONTENDED_RETRY_MAX, contended_pause, jitter};
use super::*;

#[test]
fn contended_pauses_double_up_to_a_second() {
    let pauses: Vec<u128> = (1..=9).map(|n| contended_pause(n).as_millis()).collect();
    assert_eq!(pauses, [20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
    assert_eq!(contended_pause(u32::MAX), CONTENDED_RETRY_MAX);
    // Within 3 s of contention a node makes a handful of attempts, not one every 20 ms.
    let mut elapsed = Duration::ZERO;
    let mut attempts = 0;
    while elapsed < Duration::from_secs(3) {
        attempts += 1;
        // The longest a jittered pause can be shortened to.
        elapsed += contended_pause(attempts) / 2;
    }
    assert!(attempts <= 12, "{attempts} attempts in 3 s");
    for _ in 0..1000 {
        let d = jitter(Duration::from_millis(100));
        assert!(
            d >= Duration::from_millis(50) && d < Duration::from_millis(150),
            "{d:?}"
        );
    }
}

#[test]
fn a_fair_share_divides_the_tasks_among_the_live_nodes() {
    assert_eq!(fair_cap(10_000, 20), 500);
    assert_eq!(
        fair_cap(10_000, 3),
        3_334,
        "rounded up: the shares cover every task"
    );
    assert_eq!(
        fair_cap(10_000, 1),
        10_000,
        "a node alone may take everything"
    );
    assert_eq!(fair_cap(10_000, 0), 10_000, "no count yet: alone");
    assert_eq!(fair_cap(100, 20), MIN_FAIR_BATCH, "never tiny batches");
}

#[test]
fn the_claim_lead_grows_with_the_tasks_up_to_its_bound() {
    let bound = Duration::from_secs(1);
    assert_eq!(claim_ahead(20, bound), Duration::from_millis(2));
    assert_eq!(claim_ahead(1_000, bound), Duration::from_millis(100));
    assert_eq!(claim_ahead(10_000, bound), bound);
    assert_eq!(claim_ahead(usize::MAX, bound), bound);
    assert_eq!(claim_ahead(1_000, Duration::ZERO), Duration::ZERO, "off");
}
