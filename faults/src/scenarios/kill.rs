//! `kill`: three nodes run fifty every-second tasks; every 4 to 12 s one of them is SIGKILLed
//! and started again 1 to 3 s later.

use std::time::Duration;

use tokio::time::Instant;

use crate::harness::{Entry, Options, Outcome, Result, Scenario, tick_names};

pub(super) async fn run(opts: &Options) -> Result<Outcome> {
    let mut sc = Scenario::new("kill", opts).await?;
    sc.params.takeover = true;
    let names = tick_names(50);
    let entries: Vec<Entry<'_>> = names.iter().map(|n| (n.as_str(), "* * * * * *")).collect();
    sc.write_config(&entries)?;
    for id in ["a", "b", "c"] {
        sc.add_file_node(id, None);
    }
    sc.start_all()?;
    let end = Instant::now() + Duration::from_secs_f64(opts.minutes * 60.0);
    let mut kills = 0;
    let mut aimed_kills = 0;
    while Instant::now() < end {
        let wait = Duration::from_millis(sc.rng.range(4_000, 12_001));
        sc.idle_until((Instant::now() + wait).min(end)).await;
        if Instant::now() >= end {
            break;
        }
        // Strike 20-130 ms after a tick, while that second's quick runs are in flight; half
        // the time at a node whose records show a run in flight, else at any node.
        sc.idle_until_just_after_a_tick().await;
        let mid = sc.nodes_mid_run();
        let up = sc.fleet.up();
        let aimed = !mid.is_empty() && sc.rng.chance(0.5);
        let Some(&victim) = sc.rng.pick(if aimed { &mid } else { &up }) else {
            sc.start_all()?;
            continue;
        };
        sc.sigkill(victim);
        kills += 1;
        aimed_kills += usize::from(aimed);
        let down = Duration::from_millis(sc.rng.range(1_000, 3_001));
        sc.idle(down).await;
        sc.fleet.start(victim, &mut sc.timeline)?;
    }
    sc.notes.push(format!(
        "{kills} SIGKILLs 20-130 ms after a tick ({aimed_kills} aimed at a node with a run in flight, the rest at any node), each node started again 1-3 s later"
    ));
    sc.finish().await
}
