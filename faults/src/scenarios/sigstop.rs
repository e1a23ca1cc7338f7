//! `sigstop`: two nodes run only `f.stubborn` (8 s, ignores cancellation) every 20 s. When a
//! node has started a run, it is SIGSTOPped for 7 s (past the 3 s lock lifetime), then
//! SIGCONTed; a few rounds, alternating nodes where the claims allow.

use std::time::Duration;

use crate::harness::{Options, Outcome, Result, Scenario};
use crate::record::Ev;
use crate::timeline::{Victim, now_ms};

const ROUNDS: usize = 4;
const PAUSE: Duration = Duration::from_secs(7);

pub(super) async fn run(opts: &Options) -> Result<Outcome> {
    let mut sc = Scenario::new("sigstop", opts).await?;
    sc.params.takeover = true;
    sc.write_config(&[("f.stubborn", "*/20 * * * * *")])?;
    for id in ["a", "b"] {
        sc.add_file_node(id, None);
    }
    sc.start_all()?;
    sc.idle(Duration::from_secs(3)).await;
    let mut want = 0usize;
    let mut skipped = false;
    let mut done = 0;
    let mut log = Vec::new();
    while done < ROUNDS {
        let since = now_ms() - 100;
        let Some(run) = sc
            .wait_record(Duration::from_secs(45), |r| {
                r.ev == Ev::Start && r.task == "f.stubborn" && r.t_ms >= since
            })
            .await
        else {
            return Err("no f.stubborn run started within 45 s".into());
        };
        let Some(victim) = sc.fleet.by_pid(run.pid) else {
            continue;
        };
        if victim != want && !skipped {
            // Wait for the next tick, which the other node may claim.
            skipped = true;
            continue;
        }
        skipped = false;
        let t0 = now_ms();
        sc.fleet.pause(victim, &mut sc.timeline);
        sc.idle(PAUSE).await;
        sc.fleet.resume(victim, &mut sc.timeline);
        let t1 = now_ms();
        let id = sc.fleet.id(victim).to_owned();
        sc.node_fault(
            format!("SIGSTOP {id} for 7 s"),
            t0,
            t1,
            Victim {
                node: id.clone(),
                pid: run.pid,
            },
        );
        log.push(format!(
            "{id} {} ms into run {} (tick {})",
            t0 - run.t_ms,
            run.run_id,
            run.tick.format("%H:%M:%S")
        ));
        want = 1 - victim;
        done += 1;
        // Let the rerun finish before the next tick.
        sc.idle(Duration::from_secs(4)).await;
    }
    sc.idle(Duration::from_secs(10)).await;
    sc.notes
        .push(format!("SIGSTOP for 7 s: {}", log.join("; ")));
    sc.finish().await
}
