use super::*;

#[test]
fn row_names_round_trip() {
    for (task, index) in [("a", 0), ("a", 1), ("x.y:z-1", 999), ("a[1]", 2)] {
        assert_eq!(split_row(&row_name(task, index)), (task, index));
    }
    assert_eq!(
        split_row("a[0]"),
        ("a[0]", 0),
        "shard 0 is the task's own row"
    );
    assert_eq!(split_row("a[x]"), ("a[x]", 0));
    assert_eq!(split_row("[3]"), ("[3]", 0));
    for (task, node) in [("a", "n"), ("x.y", "host-12[3]"), ("b", "@")] {
        let row = node_row(task, node);
        assert_eq!(split_row(&row), (task, 0));
        assert_eq!(row_node(&row), Some(node));
    }
    assert_eq!(row_node("a[@]"), None);
    assert_eq!(row_node("[@n]"), None);
    assert_eq!(row_node("a[3]"), None);
}

#[test]
fn shard_counts_parse() {
    assert_eq!("1".parse(), Ok(ShardCount::Fixed(1)));
    assert_eq!("1000".parse(), Ok(ShardCount::Fixed(1000)));
    for bad in ["0", "1001", "-1", "all", "", "Nodes"] {
        assert!(bad.parse::<ShardCount>().is_err(), "{bad}");
    }
}

/// `nodes` nodes claim `total` shards in passes, in turn; `free[n]` is node n's free
/// slots for the tick, `Some(age)` the tick's age at each pass. Returns each node's shards
/// and how many each took in its first pass.
fn claim_rounds(total: u32, free: &[u32], ages: &[Duration]) -> (Vec<u32>, Vec<u32>) {
    let nodes = free.len();
    let mut held = vec![0u32; nodes];
    let mut first = vec![0u32; nodes];
    let mut started = 0;
    for (pass, age) in ages.iter().enumerate() {
        for node in 0..nodes {
            let facts = ShardFacts {
                mine: held[node],
                others: u32::try_from(nodes - 1).unwrap(),
                rank: u32::try_from(node).unwrap(),
                started,
                total,
                tick_age: *age,
                ..ShardFacts::default()
            };
            let mut taken = 0;
            while started < total && held[node] + taken < free[node] && may_take(&facts, taken) {
                taken += 1;
                started += 1;
            }
            held[node] += taken;
            if pass == 0 {
                first[node] = taken;
            }
        }
    }
    (held, first)
}

#[test]
fn every_free_node_takes_its_even_share_in_its_first_pass() {
    let within = [Duration::ZERO; 5];
    let (held, first) = claim_rounds(20, &[100; 4], &within);
    assert_eq!(held, [5, 5, 5, 5]);
    assert_eq!(first, [5, 5, 5, 5], "each share at once, not one per round");
    let (held, first) = claim_rounds(100, &[100; 10], &within);
    assert_eq!(held, [10; 10]);
    assert_eq!(first, [10; 10]);
    // Shards beyond the even shares go to the first nodes by id, one each, at once.
    let (held, first) = claim_rounds(20, &[100; 6], &within);
    assert_eq!(first, [4, 4, 3, 3, 3, 3]);
    assert_eq!(held, first);
    // Fewer shards than nodes: one each, for as long as they last.
    let (held, _) = claim_rounds(3, &[100; 5], &within);
    assert_eq!(held, [1, 1, 1, 0, 0]);
}

#[test]
fn leftovers_past_the_grace_spread_over_the_free_nodes() {
    // Node 3 is busy (no free slot): its 10 shards wait out the grace, then go an even
    // share of what is left per pass, not all to the first node to claim.
    let ages = [Duration::ZERO, SPREAD_GRACE, SPREAD_GRACE, SPREAD_GRACE];
    let (held, first) = claim_rounds(40, &[100, 100, 100, 0], &ages);
    assert_eq!(first, [10, 10, 10, 0]);
    assert_eq!(held.iter().sum::<u32>(), 40);
    assert!(held[..3].iter().all(|h| (13..=14).contains(h)), "{held:?}");
    // A node alone takes everything at once.
    let (held, first) = claim_rounds(40, &[100], &[Duration::ZERO]);
    assert_eq!((held, first), (vec![40], vec![40]));
}

#[test]
fn an_overlapping_tick_waits() {
    let facts = ShardFacts {
        behind: true,
        ..ShardFacts::default()
    };
    assert!(!may_take(&facts, 0));
}
