//! Sharded and broadcast ticks: one mark folded from the runs of their shards or nodes.

use super::*;

/// A run of shard `index` of 4 of the tick at `tick`.
fn shard(id: i64, tick: u32, index: u32, took: Option<u32>, status: RunStatus) -> RunRecord {
    RunRecord {
        shard_index: index,
        shard_total: 4,
        instance_key: None,
        node_id: format!("n{}", index % 2),
        ..run(id, tick, tick + 1 + index, took, status)
    }
}

#[test]
fn a_sharded_tick_is_one_mark_folded_from_its_shards() {
    let spec = every_ten_seconds();
    let mut retried = shard(5, 10, 2, Some(1), RunStatus::Succeeded);
    retried.attempt = 2;
    let runs = [
        // Tick 10: shards 0, 1 succeeded, 2 failed then succeeded on retry, 3 runs.
        shard(1, 10, 0, Some(1), RunStatus::Succeeded),
        shard(2, 10, 1, Some(1), RunStatus::Succeeded),
        shard(3, 10, 2, Some(1), RunStatus::Failed),
        shard(4, 10, 3, None, RunStatus::Running),
        retried,
        // Tick 20: every shard ended, one lost and one failed: the worst is shown.
        shard(6, 20, 0, Some(1), RunStatus::Succeeded),
        shard(7, 20, 1, Some(1), RunStatus::Lost),
        shard(8, 20, 2, Some(1), RunStatus::Failed),
        shard(9, 20, 3, Some(1), RunStatus::Succeeded),
        // Tick 30: two shards ended, two not started yet.
        shard(10, 30, 0, Some(1), RunStatus::Succeeded),
        shard(11, 30, 1, Some(1), RunStatus::Succeeded),
        // Tick 40: whole.
        shard(12, 40, 0, Some(2), RunStatus::Succeeded),
        shard(13, 40, 1, Some(1), RunStatus::Succeeded),
        shard(14, 40, 2, Some(1), RunStatus::Succeeded),
        shard(15, 40, 3, Some(1), RunStatus::Succeeded),
    ];
    let runs: Vec<&RunRecord> = runs.iter().rev().collect();
    let state = state();
    let marks = strip(Some(&spec), &facts(&state, &runs, &[], 49), 100).marks;
    assert_eq!(
        outcomes(&marks),
        [
            (10, "running", None),
            (20, "failed", None),
            (30, "running", None),
            (40, "succeeded", None),
        ],
        "one mark per tick, not per shard"
    );
    let shards_of = |m: &Mark| match &m.fate {
        Fate::Ran {
            shards: Some(s), ..
        } => s.clone(),
        other => panic!("{other:?}"),
    };
    let first = shards_of(&marks[0]);
    assert_eq!((first.total, first.done(), first.pending()), (4, 3, 0));
    let retried = &first.runs[2];
    assert_eq!(
        (retried.run_id, retried.status, retried.attempts),
        (5, RunStatus::Succeeded, 2),
        "a shard shows its latest attempt"
    );
    assert_eq!(first.runs[3].node, "n1");
    let Fate::Ran {
        run_id,
        late,
        attempts,
        ..
    } = &marks[1].fate
    else {
        panic!("{:?}", marks[1])
    };
    assert_eq!(*run_id, 8, "the run shown is a failed shard's");
    assert_eq!(
        *late,
        Some(TimeDelta::seconds(1)),
        "its first shard's start"
    );
    assert_eq!(*attempts, 1);
    let third = shards_of(&marks[2]);
    assert_eq!((third.done(), third.pending()), (2, 2));
    let Fate::Ran { duration, .. } = &marks[3].fate else {
        panic!("{:?}", marks[3])
    };
    assert_eq!(
        *duration,
        Some(TimeDelta::seconds(4)),
        "from the first shard's start (41) to the last one's end (45)"
    );

    // A read cut at its limit inside tick 20's shards: tick 20 is left out, not shown
    // with the shards that happened to be read.
    let cut: Vec<&RunRecord> = runs[..runs.len() - 7].to_vec();
    let facts = Facts {
        more_runs: true,
        ..facts(&state, &cut, &[], 49)
    };
    assert_eq!(
        outcomes(&strip(Some(&spec), &facts, 100).marks),
        [(30, "running", None), (40, "succeeded", None)]
    );
}

/// A run of node `node`'s index of 3 counted at the tick at `tick` (a broadcast's).
fn on_node(id: i64, tick: u32, node: &str, status: RunStatus) -> RunRecord {
    let index = ["a", "b", "c"].iter().position(|n| *n == node).unwrap() as u32;
    let took = (status != RunStatus::Running).then_some(1);
    RunRecord {
        shard_index: index,
        shard_total: 3,
        instance_key: None,
        node_id: node.into(),
        ..run(id, tick, tick + 1, took, status)
    }
}

#[test]
fn a_broadcast_tick_is_done_when_each_counted_node_ran_or_its_grace_passed() {
    let spec = every_ten_seconds();
    let runs = [
        // Tick 10: all three nodes ran.
        on_node(1, 10, "a", RunStatus::Succeeded),
        on_node(2, 10, "b", RunStatus::Succeeded),
        on_node(3, 10, "c", RunStatus::Succeeded),
        // Tick 20: node b was killed mid-run (lost, never run elsewhere).
        on_node(4, 20, "a", RunStatus::Succeeded),
        on_node(5, 20, "b", RunStatus::Lost),
        on_node(6, 20, "c", RunStatus::Succeeded),
        // Tick 30: node c, counted at the tick, never started it; 13 s on, past the
        // grace (5 s for a tick every 10 s): not run on c, and the tick is done.
        on_node(7, 30, "a", RunStatus::Succeeded),
        on_node(8, 30, "b", RunStatus::Succeeded),
        // Tick 40: node c has not started it 3 s on, within the grace: pending.
        on_node(9, 40, "a", RunStatus::Succeeded),
        on_node(10, 40, "b", RunStatus::Running),
    ];
    let runs: Vec<&RunRecord> = runs.iter().rev().collect();
    let mut state = state();
    state.broadcast = true;
    let marks = strip(Some(&spec), &facts(&state, &runs, &[], 43), 100).marks;
    assert_eq!(
        outcomes(&marks),
        [
            (10, "succeeded", None),
            (20, "lost", None),
            (30, "succeeded", None),
            (40, "running", None),
        ],
    );
    let shards: Vec<Shards> = marks
        .iter()
        .map(|m| match &m.fate {
            Fate::Ran {
                shards: Some(s), ..
            } => s.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    let counts = |s: &Shards| (s.total, s.runs.len(), s.done(), s.pending(), s.not_run());
    assert!(shards.iter().all(|s| s.broadcast));
    assert_eq!(counts(&shards[0]), (3, 3, 3, 0, 0));
    let nodes: Vec<&str> = shards[0].runs.iter().map(|r| r.node.as_str()).collect();
    assert_eq!(nodes, ["a", "b", "c"], "each run names its node");
    assert_eq!(counts(&shards[1]), (3, 3, 3, 0, 0));
    assert_eq!(fold_shards(&shards[1]), RunStatus::Lost);
    assert_eq!(
        counts(&shards[2]),
        (3, 2, 2, 0, 1),
        "past its grace, a counted node with no run did not run it"
    );
    assert_eq!(counts(&shards[3]), (3, 2, 1, 1, 0), "within it, pending");

    // The same runs of fixed shards: a shard with no run is pending whatever the time
    // (a live node takes it over).
    state.broadcast = false;
    let marks = strip(Some(&spec), &facts(&state, &runs, &[], 43), 100).marks;
    assert_eq!(marks[2].fate.outcome(), "running");

    // A broadcast tick of one node is still a broadcast's: the run names its node.
    let lone = [RunRecord {
        node_id: "a".into(),
        ..run(1, 10, 11, Some(1), RunStatus::Succeeded)
    }];
    let lone: Vec<&RunRecord> = lone.iter().collect();
    state.broadcast = true;
    let marks = strip(Some(&spec), &facts(&state, &lone, &[], 13), 100).marks;
    let Fate::Ran {
        shards: Some(s), ..
    } = &marks[0].fate
    else {
        panic!("{:?}", marks[0])
    };
    assert_eq!((s.total, s.runs[0].node.as_str()), (1, "a"));
}
