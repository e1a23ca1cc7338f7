use chrono::TimeZone;
use uuid::Uuid;

use super::*;
use crate::Recovery;
use crate::store::{LockKey, SkipReason, Trigger};

fn at(second: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, second).unwrap()
}

/// Steps that record what was asked of them, in order; `renewed` were renewed by their owner
/// between the read and the release.
#[derive(Default)]
struct Recorded {
    calls: Vec<String>,
    renewed: Vec<&'static str>,
    /// What `shard_facts` says of every shard (default: a node alone).
    facts: ShardFacts,
    /// What `limit_rooms` says of each limit (absent: not declared).
    rooms: Vec<(String, crate::limits::Room)>,
}

impl ClaimSteps for Recorded {
    type Error = std::convert::Infallible;

    async fn expired_locks(
        &mut self,
        limit: i64,
    ) -> Result<Vec<(ExpiredLock, DateTime<Utc>)>, Self::Error> {
        self.calls.push(format!("expired_locks {limit}"));
        Ok(["wait", "release", "renewed", "busy"]
            .into_iter()
            .map(|name| {
                let lock = ExpiredLock {
                    key: LockKey::new(name, Uuid::nil()),
                    owner: "other".into(),
                    expired_at: at(0),
                    run: None,
                    busy: name == "busy",
                };
                (lock, at(1))
            })
            .collect())
    }

    async fn release(&mut self, releases: &[LockRelease]) -> Result<Vec<String>, Self::Error> {
        let names: Vec<String> = releases
            .iter()
            .map(|r| r.lock.key.task_name.clone())
            .collect();
        self.calls.push(format!("release {}", names.join(",")));
        Ok(names
            .into_iter()
            .filter(|n| !self.renewed.contains(&n.as_str()))
            .collect())
    }

    async fn due_tasks(
        &mut self,
        request: &ClaimRequest<'_>,
    ) -> Result<Vec<(DueTask, DateTime<Utc>)>, Self::Error> {
        self.calls.push(format!("due_tasks {}", request.limit));
        Ok(["run", "skip", "leave"]
            .into_iter()
            .map(|name| {
                let task = DueTask {
                    name: name.into(),
                    cron: "* * * * * *".into(),
                    timezone: "UTC".into(),
                    calendar: None,
                    enabled: true,
                    next_run_at: Some(at(2)),
                    last_scheduled_at: None,
                    last_finished_at: None,
                    retry: None,
                    manual: None,
                    pause: None,
                    missed_since: None,
                    backfill: None,
                    shards: 1,
                    node_pin: None,
                    broadcast: None,
                    args: None,
                    manual_args: None,
                    next_tick: None,
                    jitter: None,
                    tags: Default::default(),
                    limit: None,
                    limit_waiting_since: None,
                };
                (task, at(3))
            })
            .collect())
    }

    async fn shard_facts(
        &mut self,
        _node_id: &str,
        _live_window: Duration,
        shards: &[ShardTick<'_>],
    ) -> Result<Vec<ShardFacts>, Self::Error> {
        self.calls.push(format!("shard_facts {}", shards.len()));
        Ok(shards.iter().map(|_| self.facts).collect())
    }

    async fn broadcast_nodes(
        &mut self,
        _live_window: Duration,
        ticks: &[BroadcastTick],
    ) -> Result<Vec<Vec<String>>, Self::Error> {
        self.calls.push(format!("broadcast_nodes {}", ticks.len()));
        Ok(ticks.iter().map(|_| vec!["n".to_owned()]).collect())
    }

    async fn limit_rooms(
        &mut self,
        names: &[String],
    ) -> Result<Vec<(String, crate::limits::Room)>, Self::Error> {
        self.calls.push(format!("limit_rooms {}", names.join(",")));
        Ok(self
            .rooms
            .iter()
            .filter(|(name, _)| names.contains(name))
            .cloned()
            .collect())
    }

    async fn mark_waiting(&mut self, names: &[String]) -> Result<(), Self::Error> {
        self.calls.push(format!("mark_waiting {}", names.join(",")));
        Ok(())
    }

    async fn skip(&mut self, skips: &[TaskSkip]) -> Result<(), Self::Error> {
        let names: Vec<&str> = skips.iter().map(|s| s.name.as_str()).collect();
        self.calls.push(format!("skip {}", names.join(",")));
        Ok(())
    }

    async fn record_skips(&mut self, skips: &[SkipRecord]) -> Result<(), Self::Error> {
        self.calls.push(format!("record_skips {}", skips.len()));
        Ok(())
    }

    async fn start_runs(
        &mut self,
        node_id: &str,
        runs: Vec<(DueTask, ClaimPlan)>,
        claimed_at: DateTime<Utc>,
    ) -> Result<Vec<ClaimedRun>, Self::Error> {
        self.calls
            .push(format!("start_runs {node_id} {}", runs.len()));
        Ok(runs
            .into_iter()
            .map(|(task, plan)| ClaimedRun {
                run_id: 1,
                task_name: task.name,
                lock_token: Uuid::nil(),
                fencing_token: 1,
                scheduled_at: plan.scheduled_at,
                due_at: plan.starts_at,
                claimed_at,
                starts_in: Duration::ZERO,
                previous_finished_at: None,
                attempt: plan.attempt,
                trigger: Trigger::Schedule,
                triggered_by: None,
                missed_since: None,
                shard: crate::Shard::WHOLE,
                args: None,
                tags: Default::default(),
                timezone: "UTC".into(),
            })
            .collect())
    }
}

/// Waits for the lock named `wait`, releases the others (`busy` too: the claim must not); runs `run`, skips `skip` (one
/// skipped tick), leaves `leave`.
struct Rules;

impl ClaimRules for Rules {
    fn rescue(&self, lock: &ExpiredLock, _db_now: DateTime<Utc>) -> RescueDecision {
        if lock.key.task_name == "wait" {
            return RescueDecision::Wait;
        }
        RescueDecision::Release {
            run_end: None,
            requeue: Some(Requeue::Tick(lock.expired_at)),
            failures: FailureCount::Keep,
        }
    }

    fn plan(&self, task: &DueTask, db_now: DateTime<Utc>) -> DueDecision {
        match task.name.as_str() {
            "run" => DueDecision::Run(ClaimPlan::scheduled(
                db_now,
                None,
                Recovery::Rerun,
                Duration::from_secs(20),
            )),
            "skip" => DueDecision::Skip {
                next_run_at: NextRun::Keep,
                clear_retry: false,
                clear_pause: false,
                skips: vec![SkipRecord::new(
                    "skip",
                    SkipReason::Misfire,
                    at(0),
                    at(0),
                    1,
                )],
            },
            _ => DueDecision::Leave,
        }
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn decisions_are_applied_in_one_order_and_neither_a_renewed_nor_a_busy_lock_is_rescued() {
    let mut steps = Recorded {
        renewed: vec!["renewed"],
        ..Recorded::default()
    };
    let tasks = ["run".to_owned(), "skip".to_owned(), "leave".to_owned()];
    let request = ClaimRequest::new("node-1", &tasks, 10);
    let outcome = block_on(claim(&mut steps, &request, &Rules)).unwrap();
    assert_eq!(
        steps.calls,
        [
            "expired_locks 1000",
            "release release,renewed",
            "due_tasks 10",
            "skip skip",
            "record_skips 1",
            "start_runs node-1 1",
        ]
    );
    let waiting: Vec<&str> = outcome.waiting.iter().map(|l| &*l.key.task_name).collect();
    assert_eq!(
        waiting,
        ["wait", "busy"],
        "the rules release `busy`; its row is held"
    );
    let rescued: Vec<&str> = outcome.rescued.iter().map(|r| &*r.task_name).collect();
    assert_eq!(rescued, ["release"]);
    assert_eq!(outcome.left, ["leave"]);
    assert_eq!(outcome.skipped.len(), 1);
    assert_eq!(outcome.claimed.len(), 1);
    assert_eq!(outcome.claimed[0].claimed_at, at(3));
}

/// A due row of a broadcast task: `b` (its own row) or `b[@node]`, with a plan for `trigger`.
fn broadcast_row(node: Option<&str>, trigger: Trigger) -> (DueTask, ClaimPlan) {
    let task = DueTask {
        name: node.map_or("b".to_owned(), |n| crate::shard::node_row("b", n)),
        cron: "* * * * * *".into(),
        timezone: "UTC".into(),
        calendar: None,
        enabled: true,
        next_run_at: Some(at(2)),
        last_scheduled_at: None,
        last_finished_at: None,
        retry: None,
        manual: None,
        pause: None,
        missed_since: None,
        backfill: None,
        shards: 1,
        node_pin: Some(node.unwrap_or_default().to_owned()),
        broadcast: None,
        args: None,
        manual_args: None,
        next_tick: None,
        jitter: None,
        tags: Default::default(),
        limit: None,
        limit_waiting_since: None,
    };
    let mut plan =
        ClaimPlan::scheduled(at(2), Some(at(3)), Recovery::Rerun, Duration::from_secs(20));
    plan.trigger = trigger;
    if trigger != Trigger::Schedule {
        plan.next_run_at = NextRun::Keep;
    }
    (task, plan)
}

/// Shard `index` of a 4-shard task `t`, due on the tick at(2), its next tick at `next`.
fn shard_row(index: u32, next: DateTime<Utc>) -> (DueTask, ClaimPlan) {
    let (mut task, mut plan) = broadcast_row(None, Trigger::Schedule);
    task.name = crate::shard::row_name("t", index);
    task.shards = 4;
    task.node_pin = None;
    plan.next_run_at = NextRun::Set(Some(next));
    (task, plan)
}

#[test]
fn a_node_with_its_share_leaves_the_tick_out_until_the_grace_ends_or_the_next_tick() {
    // 4 shards on 2 live nodes, none run yet: this node (first by id) takes 2.
    let mut steps = Recorded {
        facts: ShardFacts {
            others: 1,
            ..ShardFacts::default()
        },
        ..Recorded::default()
    };
    let tasks = ["t".to_owned()];
    let request = ClaimRequest::new("n", &tasks, 10);
    for (next, leave) in [
        (at(32), crate::shard::SPREAD_GRACE),
        (at(3), Duration::from_secs(1)),
    ] {
        let runs = (0..3).map(|i| shard_row(i, next)).collect();
        let mut outcome = ClaimOutcome::default();
        let kept = block_on(spread(&mut steps, &request, runs, at(2), &mut outcome)).unwrap();
        assert_eq!(kept.len(), 2, "its share");
        assert_eq!(outcome.held_back, 1);
        assert_eq!(
            outcome.spread_done,
            [("t".to_owned(), leave)],
            "left out until the grace ends, or the next tick if sooner"
        );
    }
    // Its next tick already due (catching up): not left out, so it is not missed.
    let runs = (0..3).map(|i| shard_row(i, at(2))).collect();
    let mut outcome = ClaimOutcome::default();
    block_on(spread(&mut steps, &request, runs, at(2), &mut outcome)).unwrap();
    assert!(outcome.spread_done.is_empty());
}

#[test]
fn a_broadcast_runs_on_the_nodes_alive_at_the_tick_and_never_on_its_own_row() {
    // The recorded steps say node `n` alone was alive at every tick.
    let mut steps = Recorded::default();
    let tasks = ["b".to_owned()];
    let runs = vec![
        broadcast_row(None, Trigger::Schedule),
        broadcast_row(None, Trigger::Manual),
        broadcast_row(None, Trigger::Backfill),
        broadcast_row(Some("n"), Trigger::Schedule),
    ];
    let mut skipped = Vec::new();
    let request = ClaimRequest::new("n", &tasks, 10);
    let kept = block_on(broadcast(&mut steps, &request, runs, &mut skipped)).unwrap();
    assert_eq!(steps.calls, ["broadcast_nodes 1"], "one tick asked once");
    let kept: Vec<(&str, Trigger, crate::Shard, Recovery)> = kept
        .iter()
        .map(|(t, p)| (t.name.as_str(), p.trigger, t.shard(), p.recovery))
        .collect();
    assert_eq!(
        kept,
        [
            ("b", Trigger::Backfill, crate::Shard::WHOLE, Recovery::Rerun),
            (
                "b[@n]",
                Trigger::Schedule,
                crate::Shard { index: 0, total: 1 },
                Recovery::Never
            ),
        ]
    );
    // The own row's tick moves on; its manual request is cleared.
    let skipped: Vec<(&str, NextRun, bool)> = skipped
        .iter()
        .map(|s| (s.name.as_str(), s.next_run_at, s.clear_manual))
        .collect();
    assert_eq!(
        skipped,
        [
            ("b", NextRun::Set(Some(at(3))), false),
            ("b", NextRun::Keep, true)
        ]
    );

    // Node `m` was not alive at the tick (it joined after): its row moves past it.
    let mut skipped = Vec::new();
    let request = ClaimRequest::new("m", &tasks, 10);
    let runs = vec![broadcast_row(Some("m"), Trigger::Schedule)];
    let kept = block_on(broadcast(&mut steps, &request, runs, &mut skipped)).unwrap();
    assert!(kept.is_empty());
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].name, "b[@m]");
    assert_eq!(skipped[0].next_run_at, NextRun::Set(Some(at(3))));
}

#[test]
fn a_claim_for_no_runs_only_rescues() {
    let mut steps = Recorded::default();
    let request = ClaimRequest::new("node-1", &[], 0);
    block_on(claim(&mut steps, &request, &Rules)).unwrap();
    assert_eq!(
        steps.calls,
        ["expired_locks 1000", "release release,renewed"]
    );
}

#[test]
fn runs_of_a_limit_start_within_its_room_and_the_others_wait_marked() {
    let room = |size, holders| crate::limits::Room {
        size: Some(size),
        holders,
    };
    let mut steps = Recorded {
        rooms: vec![
            ("db".to_owned(), room(2, 1)),
            ("api".to_owned(), room(1, 0)),
        ],
        ..Recorded::default()
    };
    let row = |name: &str, limit: Option<&str>| {
        let (mut task, plan) = broadcast_row(None, Trigger::Schedule);
        task.name = name.to_owned();
        task.node_pin = None;
        task.limit = limit.map(str::to_owned);
        (task, plan)
    };
    let runs = vec![
        row("a", Some("db")),
        row("b", Some("db")),
        row("free", None),
        row("c", Some("api")),
        row("d", Some("nobody")),
    ];
    let mut outcome = ClaimOutcome::default();
    let kept = block_on(limits::limit(&mut steps, runs, &mut outcome)).unwrap();
    let kept: Vec<&str> = kept.iter().map(|(t, _)| t.name.as_str()).collect();
    assert_eq!(kept, ["a", "free", "c"]);
    assert_eq!(
        steps.calls,
        ["limit_rooms api,db,nobody", "mark_waiting b,d"],
        "each limit locked once, in name order"
    );
    assert_eq!(outcome.left, ["b", "d"]);
    assert_eq!(
        outcome.limit_waiting,
        [
            ("b".to_owned(), "db".to_owned()),
            ("d".to_owned(), "nobody".to_owned())
        ]
    );
    // No run naming a limit: no limit locked.
    let mut steps = Recorded::default();
    let mut outcome = ClaimOutcome::default();
    let kept = block_on(limits::limit(
        &mut steps,
        vec![row("free", None)],
        &mut outcome,
    ))
    .unwrap();
    assert_eq!(kept.len(), 1);
    assert!(steps.calls.is_empty());
}

#[test]
fn runs_starting_now_take_at_most_the_free_slots_and_runs_claimed_ahead_wait_for_theirs() {
    let row = |name: &str, starts: u32| {
        let (mut task, mut plan) = broadcast_row(None, Trigger::Schedule);
        task.name = name.to_owned();
        task.node_pin = None;
        plan.starts_at = at(starts);
        (task, plan)
    };
    // The claim's clock is at(3): "now1".."now3" start at once, "ahead1" and "ahead2" later.
    let runs = vec![
        row("now1", 2),
        row("now2", 3),
        row("ahead1", 4),
        row("now3", 3),
        row("ahead2", 5),
    ];
    let tasks: Vec<String> = Vec::new();
    let request = ClaimRequest::new("node-1", &tasks, 10).starting_now(2);
    let mut outcome = ClaimOutcome::default();
    let kept = slots(&request, runs.clone(), at(3), &mut outcome);
    let kept: Vec<&str> = kept.iter().map(|(t, _)| t.name.as_str()).collect();
    assert_eq!(kept, ["now1", "now2", "ahead1", "ahead2"]);
    assert_eq!(outcome.no_slot, 1, "now3 is left for a later claim");
    assert!(outcome.left.is_empty(), "no rule left it");
    // No free slot: only the runs claimed ahead.
    let request = ClaimRequest::new("node-1", &tasks, 10).starting_now(0);
    let mut outcome = ClaimOutcome::default();
    let kept = slots(&request, runs, at(3), &mut outcome);
    let kept: Vec<&str> = kept.iter().map(|(t, _)| t.name.as_str()).collect();
    assert_eq!(kept, ["ahead1", "ahead2"]);
    assert_eq!(outcome.no_slot, 3);
}
