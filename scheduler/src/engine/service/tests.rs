use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

/// Fails twice, then succeeds three times and is done.
struct Flaky {
    calls: Arc<AtomicU32>,
}

impl Service for Flaky {
    type Pass = u32;
    type Error = &'static str;

    fn what(&self) -> &'static str {
        "the flaky service"
    }

    async fn run_once(&mut self) -> Result<u32, &'static str> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= 2 { Err("down") } else { Ok(n) }
    }

    fn pause_after(&mut self, pass: u32) -> Option<Duration> {
        (pass < 5).then_some(Duration::from_secs(1))
    }
}

/// What a service runs under in these tests: fail-stop panics instead of exiting.
#[derive(Default)]
struct Parts {
    health: Health,
    events: EventBus,
    metrics: Metrics,
}

fn stop_by_panicking(service: &str, why: &str) -> ! {
    panic!("FAIL-STOP {service}: {why}")
}

impl Parts {
    fn care(&self, name: &'static str) -> Care<'_> {
        Care {
            name,
            health: &self.health,
            events: &self.events,
            metrics: &self.metrics,
            fail_stop: stop_by_panicking,
            clock: &crate::clock::Clock::System,
        }
    }
}

/// Panics on its first `panics` passes, then works `works` times and is done; tells how far
/// it got and what the health registry said while it ran.
struct Panicky {
    panics: u32,
    works: u32,
    calls: u32,
    on_panic: OnPanic,
    health: Arc<Health>,
    seen: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Service for Panicky {
    type Pass = ();
    type Error = &'static str;

    fn what(&self) -> &'static str {
        "the panicky service"
    }

    async fn run_once(&mut self) -> Result<(), &'static str> {
        self.calls += 1;
        let states: Vec<String> = self
            .health
            .services()
            .iter()
            .map(|s| format!("{}={}", s.name, s.state))
            .collect();
        self.seen.lock().unwrap().push(states.join(","));
        if self.calls <= self.panics {
            let nothing: Option<u8> = std::hint::black_box(None);
            nothing.expect("a bug in a pass");
        }
        Ok(())
    }

    fn pause_after(&mut self, (): ()) -> Option<Duration> {
        (self.calls < self.panics + self.works).then_some(Duration::from_secs(1))
    }

    fn on_panic(&self) -> OnPanic {
        self.on_panic
    }
}

fn panicky(panics: u32, works: u32, on_panic: OnPanic, health: &Arc<Health>) -> Panicky {
    Panicky {
        panics,
        works,
        calls: 0,
        on_panic,
        health: Arc::clone(health),
        seen: Arc::default(),
    }
}

/// Runs `service` on a task of its own with the registry `health`: the `scheduler.error`
/// events it raised, or the fail-stop reason if it stopped the node.
async fn run_alone(service: Panicky, health: Arc<Health>) -> (Result<u32, String>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let m = Arc::clone(&metrics);
    let joined = tokio::spawn(async move {
        let events = EventBus::default();
        let care = Care {
            name: "panicky",
            health: &health,
            events: &events,
            metrics: &m,
            fail_stop: stop_by_panicking,
            clock: &crate::clock::Clock::System,
        };
        let mut stream = events.subscribe();
        run(service, CancellationToken::new(), None, &care).await;
        drop(events);
        // Every panic was raised as `scheduler.error`.
        let mut raised = 0;
        while let Some(event) = stream.recv().await {
            assert_eq!(event.event.kind(), "scheduler.error");
            raised += 1;
        }
        raised
    })
    .await;
    match joined {
        Ok(raised) => (Ok(raised), metrics),
        Err(e) => (
            Err(super::super::health::panic_message(e.into_panic().as_ref())),
            metrics,
        ),
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_pass_is_reported_and_the_service_runs_again() {
    let health = Arc::new(Health::default());
    let service = panicky(2, 2, OnPanic::Restart, &health);
    let seen = Arc::clone(&service.seen);
    let (ended, metrics) = run_alone(service, Arc::clone(&health)).await;
    assert_eq!(ended, Ok(2), "two panics, two `scheduler.error` events");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            "panicky=running",
            "panicky=restarting",
            "panicky=restarting",
            "panicky=running"
        ]
    );
    assert!(
        metrics
            .encode()
            .contains("scheduler_service_panics_total{service=\"panicky\"} 2"),
        "{}",
        metrics.encode()
    );
    // Done: no longer shown.
    assert!(health.services().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_service_that_keeps_panicking_stops_the_node() {
    let health = Arc::new(Health::default());
    let service = panicky(u32::MAX, 0, OnPanic::Restart, &health);
    let (ended, _) = run_alone(service, Arc::clone(&health)).await;
    let why = ended.expect_err("fail-stop");
    assert!(
        why.contains("FAIL-STOP panicky: panicked 5 times in a row")
            && why.contains("a bug in a pass"),
        "{why}"
    );
    assert_eq!(health.down()[0].state, "stopping");
}

#[tokio::test(start_paused = true)]
async fn a_service_that_cannot_be_restarted_stops_the_node_at_its_first_panic() {
    let health = Arc::new(Health::default());
    let service = panicky(1, 5, OnPanic::FailStop, &health);
    let seen = Arc::clone(&service.seen);
    let (ended, _) = run_alone(service, health).await;
    let why = ended.expect_err("fail-stop");
    assert!(why.contains("cannot be restarted safely"), "{why}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn backs_off_after_failures_and_stops_when_done() {
    let parts = Parts::default();
    let calls = Arc::new(AtomicU32::new(0));
    let started = tokio::time::Instant::now();
    run(
        Flaky {
            calls: Arc::clone(&calls),
        },
        CancellationToken::new(),
        None,
        &parts.care("flaky"),
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    // 250 ms + 500 ms of backoff, then two 1 s pauses.
    assert_eq!(started.elapsed(), Duration::from_millis(2_750));
}

/// Counts its passes; pauses an hour after each.
struct Hourly {
    calls: Arc<AtomicU32>,
}

impl Service for Hourly {
    type Pass = ();
    type Error = &'static str;

    fn what(&self) -> &'static str {
        "the hourly service"
    }

    async fn run_once(&mut self) -> Result<(), &'static str> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn pause_after(&mut self, _pass: ()) -> Option<Duration> {
        Some(Duration::from_secs(3600))
    }
}

/// Real time (not Tokio's paused clock, which would end the hour by itself): only the move
/// of the test clock ends the pause, and the step returns once the pass at the new time ended.
#[tokio::test]
async fn a_step_of_the_test_clock_ends_the_pause_and_waits_for_the_pass() {
    let parts = Parts::default();
    let test_clock = crate::clock::TestClock::frozen_at(chrono::Utc::now());
    let clock = crate::clock::Clock::Test(test_clock.clone());
    let calls = Arc::new(AtomicU32::new(0));
    let stop = CancellationToken::new();
    let looping = tokio::spawn({
        let calls = Arc::clone(&calls);
        let stop = stop.clone();
        async move {
            let care = Care {
                clock: &clock,
                ..parts.care("hourly")
            };
            run(Hourly { calls }, stop, None, &care).await;
        }
    });
    wait_for(|| calls.load(Ordering::SeqCst) == 1).await;
    test_clock.step(Duration::from_secs(3600)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one pass at the new time");
    test_clock.step(Duration::from_secs(1)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    stop.cancel();
    looping.await.unwrap();
    // The service left the clock: a step no longer waits for it.
    test_clock.step(Duration::from_secs(1)).await;
}

/// Waits (on the real clock, at most ten seconds) until `done`.
async fn wait_for(done: impl Fn() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not done within ten seconds");
}

#[tokio::test(start_paused = true)]
async fn stops_when_told() {
    let parts = Parts::default();
    let stop = CancellationToken::new();
    stop.cancel();
    let calls = Arc::new(AtomicU32::new(0));
    run(
        Flaky {
            calls: Arc::clone(&calls),
        },
        stop,
        None,
        &parts.care("flaky"),
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}
