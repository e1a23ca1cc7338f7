//! `rolling`: three nodes run `f.slow` every 5 s and ten quick tasks; each node in turn is
//! stopped gracefully (SIGTERM, it must exit 0 within shutdown timeout + 10 s) and started
//! again, for several rounds.

use std::time::Duration;

use crate::harness::{Entry, Options, Outcome, Result, Scenario, tick_names};

const ROUNDS: usize = 3;

pub(super) async fn run(opts: &Options) -> Result<Outcome> {
    let mut sc = Scenario::new("rolling", opts).await?;
    let names = tick_names(10);
    let mut entries: Vec<Entry<'_>> = names.iter().map(|n| (n.as_str(), "* * * * * *")).collect();
    entries.push(("f.slow", "*/5 * * * * *"));
    sc.write_config(&entries)?;
    for id in ["a", "b", "c"] {
        sc.add_file_node(id, None);
    }
    sc.start_all()?;
    sc.idle(Duration::from_secs(8)).await;
    let mut drains = Vec::new();
    for _ in 0..ROUNDS {
        for i in 0..sc.fleet.len() {
            if sc.fleet.pid(i).is_none() {
                sc.fleet.start(i, &mut sc.timeline)?;
                sc.idle(Duration::from_secs(4)).await;
            }
            let exits = sc.fleet.terminate(&[i], &mut sc.timeline).await;
            for (node, status, secs) in exits {
                drains.push(format!("{node} {status} in {secs:.1} s"));
            }
            sc.idle(Duration::from_secs(1)).await;
            sc.fleet.start(i, &mut sc.timeline)?;
            sc.idle(Duration::from_secs(6)).await;
        }
    }
    sc.notes.push(format!(
        "{ROUNDS} rounds of graceful restarts, one node at a time: {}",
        drains.join(", ")
    ));
    sc.finish().await
}
