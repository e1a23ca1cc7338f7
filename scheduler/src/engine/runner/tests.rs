use super::*;

/// Attempt `n`'s pause is `backoff * 2^(n-1)` with equal jitter: between half of it and all
/// of it, capped at a day; never negative, whatever the attempt.
#[test]
fn retry_delays_double_per_attempt_with_equal_jitter_and_a_cap() {
    let backoff = Duration::from_secs(10);
    for (attempt, full) in [(1, 10), (2, 20), (3, 40), (6, 320)] {
        let full = Duration::from_secs(full);
        for _ in 0..500 {
            let d = retry_delay(backoff, attempt);
            assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d:?}");
        }
    }
    let day = Duration::from_secs(86_400);
    for attempt in [20, 21, 1000, i32::MAX] {
        let d = retry_delay(backoff, attempt);
        assert!(d >= day / 2 && d <= day, "attempt {attempt}: {d:?}");
    }
    for attempt in [0, -1, i32::MIN] {
        let d = retry_delay(backoff, attempt);
        assert!(d >= backoff / 2 && d <= backoff, "attempt {attempt}: {d:?}");
    }
    assert_eq!(retry_delay(Duration::ZERO, 3), Duration::ZERO);
}
