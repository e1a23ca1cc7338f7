/// A build without `admin` or `webhook` (CI's minimal-features step) refuses their
/// variables rather than ignoring them.
#[cfg(not(all(feature = "admin", feature = "webhook")))]
#[test]
fn a_variable_of_a_missing_feature_names_it() {
    let missing = [
        #[cfg(not(feature = "admin"))]
        ("SCHEDULER_ADMIN_ADDR", "127.0.0.1:9870", "admin"),
        #[cfg(not(feature = "webhook"))]
        (
            "SCHEDULER_WEBHOOK_URL",
            "https://hooks.example/x",
            "webhook",
        ),
    ];
    for (name, value, feature) in missing {
        let lookup = |n: &str| (n == name).then(|| value.to_owned());
        let message = super::SchedulerBuilder::from_lookup(lookup)
            .expect_err("refused")
            .to_string();
        assert!(
            message.contains(name) && message.contains(&format!("`{feature}` feature")),
            "{message}"
        );
    }
}

/// The admin server's limits come from their variables (unset ones keep their defaults);
/// a limit of zero is refused at build time, naming its variable.
#[cfg(feature = "admin")]
#[test]
fn admin_limits_are_read_from_the_environment_and_zero_is_refused() {
    use std::time::Duration;
    let env = [
        ("SCHEDULER_ADMIN_REQUEST_TIMEOUT", "2s"),
        ("SCHEDULER_ADMIN_MAX_CONNECTIONS", "16"),
    ];
    let lookup = |n: &str| {
        env.iter()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| v.to_string())
    };
    let limits = super::SchedulerBuilder::from_lookup(lookup)
        .unwrap()
        .admin_limits;
    assert_eq!(
        limits,
        crate::admin::AdminLimits::default()
            .request_timeout(Duration::from_secs(2))
            .max_connections(16)
    );
    let refused = crate::Scheduler::builder()
        .registry(crate::TaskRegistry::collect().unwrap().retain(|_| false))
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .admin_limits(crate::admin::AdminLimits::default().idle_timeout(Duration::ZERO))
        .build()
        .expect_err("refused")
        .to_string();
    assert!(
        refused.contains("SCHEDULER_ADMIN_IDLE_TIMEOUT"),
        "{refused}"
    );
}

/// A setting outside its range (`docs/limits.md`) is refused by `build()`, and its variable
/// where it is read, each naming the setting and the range.
#[test]
fn settings_outside_their_range_are_refused_naming_setting_and_range() {
    use std::time::Duration;
    let lookup = |n: &str| (n == "SCHEDULER_LOCK_LIFETIME").then(|| "300000years".to_owned());
    let e = super::SchedulerBuilder::from_lookup(lookup)
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains("`SCHEDULER_LOCK_LIFETIME`") && e.contains("from 300ms to 1day"),
        "{e}"
    );
    let builder = || {
        crate::Scheduler::builder()
            .registry(crate::TaskRegistry::collect().unwrap().retain(|_| false))
    };
    let ages = Duration::from_secs(300_000 * 31_557_600);
    for (built, setting, range) in [
        (
            builder().lock_lifetime(Duration::MAX).build(),
            "`lock_lifetime`",
            "from 300ms to 1day",
        ),
        (
            builder().poll_interval(ages).build(),
            "`poll_interval`",
            "from 10ms to 1day",
        ),
        (
            builder().missed_grace(ages).build(),
            "`missed_grace`",
            "from 1s to 1year",
        ),
        (
            builder().max_concurrent(0).build(),
            "`max_concurrent`",
            "from 1 to 1000000",
        ),
        (
            builder().default_retries(u32::MAX).build(),
            "`default_retries`",
            "from 0 to 10000",
        ),
    ] {
        let e = built.expect_err("refused").to_string();
        assert!(e.contains(setting) && e.contains(range), "{e}");
    }
}
