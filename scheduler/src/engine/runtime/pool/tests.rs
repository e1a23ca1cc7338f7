use super::*;

#[test]
fn work_queued_behind_a_blocked_worker_gets_a_new_one() {
    let engine = super::super::engine().unwrap();
    // One worker, which the first future blocks until the second one has run.
    let pool = Pool::new(
        engine.handle().clone(),
        1,
        engine.handle(),
        Counter::default(),
    );
    let (ran, quick_ran) = std::sync::mpsc::channel();
    let (unblock, blocked) = std::sync::mpsc::channel::<()>();
    let (done, finished) = std::sync::mpsc::channel();
    let first = done.clone();
    pool.spawn(async move {
        blocked.recv().unwrap();
        first.send("blocker").unwrap();
    });
    pool.spawn(async move {
        ran.send(()).unwrap();
        done.send("quick").unwrap();
    });
    // (A bound so that a pool that never replaces its worker fails rather than hangs.)
    let hang = Duration::from_secs(60);
    quick_ran
        .recv_timeout(hang)
        .expect("the second future never ran: nothing replaced the blocked worker");
    assert_eq!(finished.recv_timeout(hang).unwrap(), "quick");
    assert_eq!(pool.threads(), 2, "the blocked worker and its replacement");
    unblock.send(()).unwrap();
    assert_eq!(finished.recv_timeout(hang).unwrap(), "blocker");
    // The replaced worker ends once its poll returns: the pool is full again.
    let settled = std::time::Instant::now() + Duration::from_secs(30);
    while pool.threads() > 1 && std::time::Instant::now() < settled {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(pool.threads(), 1);
}

#[test]
fn work_queued_behind_a_spinning_worker_gets_a_new_one() {
    let engine = super::super::engine().unwrap();
    let replaced = Counter::default();
    let pool = Pool::new(
        engine.handle().clone(),
        1,
        engine.handle(),
        replaced.clone(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let spinning = Arc::clone(&stop);
    let (done, finished) = std::sync::mpsc::channel();
    let first = done.clone();
    pool.spawn(async move {
        while !spinning.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        first.send("spinner").unwrap();
    });
    pool.spawn(async move {
        done.send("quick").unwrap();
    });
    let hang = Duration::from_secs(60);
    let got = finished.recv_timeout(hang);
    stop.store(true, Ordering::Release);
    assert_eq!(
        got.expect("the second future never ran: nothing replaced the spinning worker"),
        "quick"
    );
    assert_eq!(finished.recv_timeout(hang).unwrap(), "spinner");
    assert_eq!(replaced.get(), 1);
}

#[cfg(target_os = "linux")]
#[test]
fn a_thread_asleep_is_held_and_one_on_its_cpu_only_once_it_has_used_the_limit() {
    // Asleep in the kernel: held at once.
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (wake, asleep) = std::sync::mpsc::channel::<()>();
    let sleeper = std::thread::spawn(move || {
        tid_tx.send(thread::id()).unwrap();
        asleep.recv().unwrap();
    });
    let worker = Worker::new();
    worker.tid.store(tid_rx.recv().unwrap(), Ordering::Release);
    let settled = std::time::Instant::now() + Duration::from_secs(30);
    while !worker.held(1) && std::time::Instant::now() < settled {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(worker.held(1), "a thread asleep in recv() is held");
    wake.send(()).unwrap();
    sleeper.join().unwrap();

    // This thread, on its CPU: the first look at a poll only notes its CPU time; later
    // looks call it held once it has used more than the limit since.
    let me = Worker::new();
    me.tid.store(thread::id(), Ordering::Release);
    assert!(!me.held(7), "first look at poll 7");
    assert!(!me.held(7), "no CPU time used since");
    let cpu = |tid| thread::look(tid).unwrap().1;
    let from = cpu(thread::id());
    while cpu(thread::id()) - from <= 2 * u64::try_from(BLOCKED_AFTER.as_nanos()).unwrap() {
        std::hint::spin_loop();
    }
    assert!(me.held(7), "spun for twice the limit");
    assert!(!me.held(8), "a new poll starts over");
}

#[test]
fn the_kernels_lines_are_read() {
    let stat = "4242 (scheduler-h) x) R 1 2 3";
    assert_eq!(thread::parse_state(stat), Some(thread::State::OnCpu));
    assert_eq!(
        thread::parse_state("4242 (a b) S 1 2"),
        Some(thread::State::Off)
    );
    assert_eq!(thread::parse_state("garbage"), None);
    assert_eq!(thread::parse_cpu("123456 789 10\n"), Some(123_456));
    assert_eq!(thread::parse_cpu(""), None);
}
