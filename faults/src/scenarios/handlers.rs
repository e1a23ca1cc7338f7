//! `handlers`: three nodes run handlers that misbehave the way user code does — four that block
//! their thread for 5 s (`std::thread::sleep`), three that spin on the CPU for 5 s, every 4 s,
//! more of them at once than the machine has cores and longer than the 3 s lock lifetime —
//! beside ten quick every-second tasks, and one of each kind isolated in a child process
//! (`isolation = "process"`); then each node in turn is stopped gracefully and started
//! again. The engine must keep every lock renewed and every quick task running: no run overlaps
//! another of its task, no tick is lost, no node exits on its own.

use std::time::Duration;

use tokio::time::Instant;

use crate::harness::{Entry, Options, Outcome, Result, Scenario, tick_names};

pub(super) async fn run(opts: &Options) -> Result<Outcome> {
    let mut sc = Scenario::new("handlers", opts).await?;
    let names = tick_names(10);
    let mut entries: Vec<Entry<'_>> = names.iter().map(|n| (n.as_str(), "* * * * * *")).collect();
    for task in [
        "f.block.0",
        "f.block.1",
        "f.block.2",
        "f.block.3",
        "f.spin.0",
        "f.spin.1",
        "f.spin.2",
        "f.iso.block",
        "f.iso.spin",
    ] {
        entries.push((task, "*/4 * * * * *"));
    }
    sc.write_config(&entries)?;
    for id in ["a", "b", "c"] {
        sc.add_file_node(id, None);
    }
    sc.start_all()?;
    let end = Instant::now() + Duration::from_secs_f64(opts.minutes * 60.0);
    sc.idle_until(end).await;
    // A graceful restart of each node while its handlers block: they finish within the
    // shutdown timeout, and the node exits 0.
    let mut drains = Vec::new();
    for i in 0..sc.fleet.len() {
        let exits = sc.fleet.terminate(&[i], &mut sc.timeline).await;
        for (node, status, secs) in exits {
            drains.push(format!("{node} {status} in {secs:.1} s"));
        }
        sc.fleet.start(i, &mut sc.timeline)?;
        sc.idle(Duration::from_secs(6)).await;
    }
    sc.notes.push(format!(
        "4 handlers blocking their thread 5 s and 3 spinning 5 s, and one of each isolated in a child process, every 4 s, beside 10 every-second tasks; then a graceful restart of each node: {}",
        drains.join(", ")
    ));
    sc.finish().await
}
