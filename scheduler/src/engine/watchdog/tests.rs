use super::*;

#[test]
fn the_handler_is_stopped_strictly_before_the_lock_can_expire_for_every_lifetime() {
    for ms in [
        300u64, 1_000, 3_000, 20_000, 40_000, 60_000, 120_000, 3_600_000,
    ] {
        let t = LeaseTimes::for_lifetime(Duration::from_millis(ms));
        let sent = Instant::now();
        let expiry = sent + t.lifetime;
        assert!(t.stop_after(sent) < expiry, "{ms} ms");
        assert!(t.warn_after(sent) < t.stop_after(sent), "{ms} ms");
        let fail_stop = sent + t.fail_stop_offset();
        assert!(
            t.stop_after(sent) < fail_stop && fail_stop < expiry,
            "{ms} ms"
        );
        assert!(t.margin >= Duration::from_millis(10), "{ms} ms");
    }
}
