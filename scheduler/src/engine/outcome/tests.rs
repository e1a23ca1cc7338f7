use super::*;
use crate::store::{LockKey, LockedRun};

fn err(message: &str) -> TaskError {
    message.to_owned().into()
}

#[test]
fn ok_is_succeeded_even_when_asked_to_stop() {
    for stop in [None, Some(StopReason::Shutdown)] {
        let d = decide(Ending::Returned(Ok(())), stop.as_ref(), Recovery::Rerun);
        assert_eq!(d.end.status, RunStatus::Succeeded);
        assert!(!d.hand_over);
        assert_eq!(d.failures, FailureCount::Reset);
    }
}

#[test]
fn an_error_is_a_failure_unless_the_handler_was_asked_to_stop() {
    let d = decide(
        Ending::Returned(Err(err("upstream said no"))),
        None,
        Recovery::Rerun,
    );
    assert_eq!(d.end.status, RunStatus::Failed);
    assert_eq!(d.end.error.as_deref(), Some("upstream said no"));
    assert!(!d.hand_over);

    for reason in [
        StopReason::Shutdown,
        StopReason::LockLost(LockLoss::Unrenewable("db down".into())),
        StopReason::LockLost(LockLoss::TakenOver),
    ] {
        let d = decide(
            Ending::Returned(Err(err("did not finish"))),
            Some(&reason),
            Recovery::Rerun,
        );
        assert_eq!(d.end.status, RunStatus::Interrupted, "{reason:?}");
        assert!(d.hand_over);
        assert_eq!(d.failures, FailureCount::Keep);
        assert!(d.end.error.unwrap().contains("did not finish"));
    }
}

#[test]
fn stopped_and_never_started_runs_are_interrupted_and_handed_over() {
    for ending in [Ending::Stopped(None), Ending::NotStarted] {
        let d = decide(ending, Some(&StopReason::Shutdown), Recovery::Rerun);
        assert_eq!(d.end.status, RunStatus::Interrupted);
        assert!(d.hand_over);
    }
}

#[test]
fn only_a_run_handed_over_unstarted_leaves_the_tasks_last_run() {
    let slot = StopReason::NoSlot(std::time::Duration::from_secs(60));
    for (stop, recovery) in [
        (&StopReason::Shutdown, Recovery::Rerun),
        (&StopReason::Shutdown, Recovery::Never),
        (&slot, Recovery::Rerun),
    ] {
        let d = decide(Ending::NotStarted, Some(stop), recovery);
        assert!(d.hand_over, "{stop:?} {recovery:?}");
        assert_eq!(d.last_run, LastRun::Keep, "{stop:?} {recovery:?}");
    }
    // A run that started is the task's last run however it ended; so is a cancelled run that
    // never started (its tick is not run again).
    let cancel = StopReason::Cancelled("alice".into());
    for (ending, stop) in [
        (Ending::Returned(Ok(())), None),
        (Ending::Returned(Err(err("no"))), None),
        (
            Ending::Returned(Err(err("cut"))),
            Some(&StopReason::Shutdown),
        ),
        (Ending::Stopped(None), Some(&StopReason::Shutdown)),
        (Ending::Panicked("boom".into()), None),
        (Ending::NotStarted, Some(&cancel)),
    ] {
        let label = format!("{ending:?} {stop:?}");
        let d = decide(ending, stop, Recovery::Rerun);
        assert_eq!(d.last_run, LastRun::Record, "{label}");
    }
}

#[test]
fn past_its_timeout_a_run_is_timed_out_unless_it_finished() {
    let t = StopReason::Timeout(std::time::Duration::from_secs(30));
    for ending in [
        Ending::Returned(Err(err("cut short"))),
        Ending::Stopped(None),
    ] {
        let d = decide(ending, Some(&t), Recovery::Rerun);
        assert_eq!(d.end.status, RunStatus::TimedOut);
        assert!(!d.hand_over, "the task's retries decide");
        assert_eq!(d.failures, FailureCount::Increment);
        assert!(d.end.error.unwrap().contains("timeout of 30s"));
    }
    let d = decide(Ending::Returned(Ok(())), Some(&t), Recovery::Rerun);
    assert_eq!(d.end.status, RunStatus::Succeeded);
}

#[test]
fn a_panic_is_a_failure() {
    let d = decide(
        Ending::Panicked("boom".into()),
        Some(&StopReason::Shutdown),
        Recovery::Rerun,
    );
    assert_eq!(d.end.status, RunStatus::Failed);
    assert_eq!(d.end.error.as_deref(), Some("handler panicked: boom"));
}

#[test]
fn an_at_most_once_run_asked_to_stop_or_stopped_is_never_run_again() {
    let timeout = StopReason::Timeout(std::time::Duration::from_secs(1));
    let shutdown = StopReason::Shutdown;
    let lost = StopReason::LockLost(LockLoss::Unrenewable("db down".into()));
    let cases: Vec<(Ending, Option<&StopReason>, RunStatus)> = vec![
        (
            Ending::Stopped(None),
            Some(&shutdown),
            RunStatus::Interrupted,
        ),
        (Ending::Stopped(None), Some(&lost), RunStatus::Interrupted),
        (
            Ending::Stopped(None),
            Some(&StopReason::LockLost(LockLoss::TakenOver)),
            RunStatus::Interrupted,
        ),
        (
            Ending::Returned(Err(err("half done"))),
            Some(&shutdown),
            RunStatus::Interrupted,
        ),
        (Ending::Stopped(None), Some(&timeout), RunStatus::TimedOut),
        (
            Ending::Returned(Err(err("cut short"))),
            Some(&timeout),
            RunStatus::TimedOut,
        ),
        (
            Ending::Panicked("boom".into()),
            Some(&lost),
            RunStatus::Failed,
        ),
    ];
    for (ending, stop, status) in cases {
        let label = format!("{ending:?} {stop:?}");
        let d = decide(ending, stop, Recovery::Never);
        assert_eq!(d.end.status, status, "{label}");
        assert!(!d.hand_over, "{label}");
        assert!(!d.may_retry, "{label}");
        assert!(d.end.error.unwrap().contains(NOT_RUN_AGAIN), "{label}");
    }
    // A failure it reported on its own is retried per `retries`; a run that never started
    // runs again; a run that returned `Ok` is done.
    let d = decide(Ending::Returned(Err(err("no"))), None, Recovery::Never);
    assert!(d.may_retry && !d.hand_over);
    let d = decide(Ending::Panicked("boom".into()), None, Recovery::Never);
    assert!(d.may_retry && !d.hand_over);
    let d = decide(Ending::NotStarted, Some(&shutdown), Recovery::Never);
    assert!(d.hand_over);
    let d = decide(Ending::Returned(Ok(())), Some(&shutdown), Recovery::Never);
    assert_eq!(d.end.status, RunStatus::Succeeded);
    // The same endings of a `rerun` task run again.
    let d = decide(Ending::Stopped(None), Some(&timeout), Recovery::Rerun);
    assert!(d.may_retry);
    let d = decide(Ending::Stopped(None), Some(&shutdown), Recovery::Rerun);
    assert!(d.hand_over);
}

fn expired(recovery: Recovery) -> ExpiredLock {
    ExpiredLock {
        key: LockKey::new("t", uuid::Uuid::nil()),
        owner: "n1".into(),
        expired_at: "2026-01-01T00:00:10Z".parse().unwrap(),
        run: Some(LockedRun {
            run_id: 7,
            scheduled_at: "2026-01-01T00:00:00Z".parse().unwrap(),
            recovery,
            attempt: 1,
            trigger: Trigger::Schedule,
            triggered_by: None,
            cancel_requested_by: None,
        }),
        busy: false,
    }
}

#[test]
fn an_unknown_outcome_is_lost_and_reruns_per_the_recovery_rule() {
    let RescueDecision::Release {
        run_end, requeue, ..
    } = unknown(&expired(Recovery::Rerun), Utc::now())
    else {
        panic!("released")
    };
    assert_eq!(run_end.unwrap().status, RunStatus::Lost);
    assert_eq!(
        requeue,
        Some(Requeue::Tick("2026-01-01T00:00:00Z".parse().unwrap()))
    );

    let RescueDecision::Release {
        run_end, requeue, ..
    } = unknown(&expired(Recovery::Never), Utc::now())
    else {
        panic!("released")
    };
    assert!(run_end.unwrap().error.unwrap().contains("recovery = never"));
    assert_eq!(requeue, None);
}

#[test]
fn a_cancelled_run_that_did_not_finish_is_cancelled_and_never_run_again() {
    let cancel = StopReason::Cancelled("alice".into());
    for recovery in [Recovery::Rerun, Recovery::Never] {
        let cases: Vec<(Ending, &str)> = vec![
            (Ending::Returned(Err(err("half done"))), "half done"),
            (
                Ending::Stopped(None),
                "did not return within 10s and was stopped",
            ),
            (
                Ending::Stopped(Some("killed by signal SIGKILL".into())),
                "was stopped (killed by signal SIGKILL)",
            ),
            (Ending::Panicked("boom".into()), "panicked: boom"),
            (
                Ending::Crashed("killed by signal SIGSEGV".into()),
                "process ended: killed by signal SIGSEGV",
            ),
            (Ending::NotStarted, "before it started"),
        ];
        for (ending, says) in cases {
            let label = format!("{ending:?} {recovery:?}");
            let d = decide(ending, Some(&cancel), recovery);
            assert_eq!(d.end.status, RunStatus::Cancelled, "{label}");
            assert!(!d.hand_over, "{label}");
            assert!(!d.may_retry, "{label}");
            assert_eq!(d.failures, FailureCount::Keep, "{label}");
            let error = d.end.error.unwrap();
            assert!(error.starts_with("cancelled by alice"), "{label}: {error}");
            assert!(error.contains(says), "{label}: {error}");
            assert!(error.contains(CANCELLED_NOT_RUN_AGAIN), "{label}: {error}");
        }
    }
}

#[test]
fn a_cancelled_run_that_returned_ok_finished_its_work() {
    let cancel = StopReason::Cancelled("alice".into());
    let d = decide(Ending::Returned(Ok(())), Some(&cancel), Recovery::Rerun);
    assert_eq!(d.end.status, RunStatus::Succeeded);
    assert_eq!(d.end.error, None);
    assert_eq!(d.failures, FailureCount::Reset);
}

#[test]
fn a_cancelled_run_whose_node_died_is_cancelled_and_never_run_again() {
    for recovery in [Recovery::Rerun, Recovery::Never] {
        let mut lock = expired(recovery);
        lock.run.as_mut().unwrap().cancel_requested_by = Some("alice".into());
        let RescueDecision::Release {
            run_end,
            requeue,
            failures,
        } = unknown(&lock, Utc::now())
        else {
            panic!("released")
        };
        let run_end = run_end.unwrap();
        assert_eq!(run_end.status, RunStatus::Cancelled, "{recovery:?}");
        let error = run_end.error.unwrap();
        assert!(error.starts_with("cancelled by alice"), "{error}");
        assert!(error.contains("node n1 stopped renewing"), "{error}");
        assert_eq!(requeue, None, "{recovery:?}");
        assert_eq!(failures, FailureCount::Keep);
    }
}

#[test]
fn errors_are_redacted() {
    let d = decide(
        Ending::Returned(Err(err(
            "cannot reach postgres://app:s3cret@db:5432/jobs: refused",
        ))),
        None,
        Recovery::Rerun,
    );
    assert_eq!(
        d.end.error.as_deref(),
        Some("cannot reach postgres://app:***@db:5432/jobs: refused")
    );
    let d = decide(
        Ending::Panicked("bad DSN host=db password='s3 cret'".into()),
        None,
        Recovery::Rerun,
    );
    assert!(!d.end.error.unwrap().contains("s3 cret"));
}

#[test]
fn errors_are_cleaned_and_bounded() {
    assert_eq!(clean_error("a\0b\nc"), "a\u{fffd}b\nc");
    let long = "é".repeat(10_000); // 20,000 bytes
    let cleaned = clean_error(&long);
    assert!(cleaned.len() <= MAX_ERROR_BYTES, "{}", cleaned.len());
    assert!(cleaned.ends_with("[cut: 20000 bytes in all]"));
}
#[test]
fn a_crashed_child_is_a_failure_like_a_panic_with_what_happened() {
    let crash = || Ending::Crashed("the handler's process was killed by SIGSEGV".into());
    let d = decide(crash(), None, Recovery::Never);
    assert_eq!(d.end.status, RunStatus::Failed);
    assert!(
        d.may_retry,
        "a crash nobody asked for is the handler's own failure"
    );
    assert!(d.end.error.as_deref().unwrap().contains("SIGSEGV"));
    assert_eq!(d.failures, FailureCount::Increment);

    let shutdown = StopReason::Shutdown;
    let d = decide(crash(), Some(&shutdown), Recovery::Never);
    assert_eq!(d.end.status, RunStatus::Failed);
    assert!(!d.may_retry && !d.hand_over);
    assert!(d.end.error.as_deref().unwrap().contains(NOT_RUN_AGAIN));

    let d = decide(crash(), Some(&shutdown), Recovery::Rerun);
    assert!(d.may_retry && !d.hand_over);
}

#[test]
fn a_killed_child_says_how_it_was_stopped() {
    let killed = || Ending::Stopped(Some("killed by SIGKILL, sent by the node".into()));
    let timeout = StopReason::Timeout(std::time::Duration::from_secs(1));
    let d = decide(killed(), Some(&timeout), Recovery::Rerun);
    assert_eq!(d.end.status, RunStatus::TimedOut);
    assert!(d.end.error.as_deref().unwrap().contains("SIGKILL"));
    let d = decide(killed(), Some(&StopReason::Shutdown), Recovery::Never);
    assert_eq!(d.end.status, RunStatus::Interrupted);
    assert!(!d.hand_over);
    assert!(d.end.error.as_deref().unwrap().contains("SIGKILL"));
    assert!(d.end.error.as_deref().unwrap().contains(NOT_RUN_AGAIN));
}

#[test]
fn a_backfill_run_handed_back_unstarted_puts_its_tick_back_a_started_one_does_not() {
    let tick = Utc::now() - chrono::TimeDelta::days(2);
    let now = Utc::now();
    let d = decide(
        Ending::NotStarted,
        Some(&StopReason::Shutdown),
        Recovery::Never,
    );
    assert!(d.hand_over && d.last_run == LastRun::Keep, "{d:?}");
    assert_eq!(
        requeue_of(Trigger::Backfill, tick, 1, None, now, false),
        Some(Requeue::Backfill(tick)),
        "no handler ran: the backfill runs its tick again"
    );
    assert_eq!(
        requeue_of(Trigger::Backfill, tick, 1, None, now, true),
        None,
        "a started run's tick ends with it"
    );
    assert_eq!(
        requeue_of(Trigger::Schedule, tick, 1, None, now, false),
        Some(Requeue::Tick(tick))
    );
}
