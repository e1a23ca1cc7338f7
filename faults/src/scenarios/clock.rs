//! `clock`: three nodes, one with its wall clock 5 minutes ahead and one 3 minutes behind
//! (libfaketime). The engine must go by the database's clock; the judge corrects the skewed
//! nodes' record times by the known offsets.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::harness::{
    Entry, Options, Outcome, Result, Scenario, Skew, faketime_library, tick_names,
};
use crate::record::Ev;

pub(super) async fn run(opts: &Options) -> Result<Outcome> {
    let library = faketime_library()?;
    let mut sc = Scenario::new("clock", opts).await?;
    let names = tick_names(20);
    let mut entries: Vec<Entry<'_>> = names.iter().map(|n| (n.as_str(), "* * * * * *")).collect();
    entries.push(("f.finish", "*/2 * * * * *"));
    entries.push(("f.slow", "*/10 * * * * *"));
    sc.write_config(&entries)?;
    let skew = |faketime: &str, offset_ms| Skew {
        faketime: faketime.to_owned(),
        offset_ms,
        library: library.clone(),
    };
    sc.add_file_node("a", None);
    sc.add_file_node("b-ahead-5m", Some(skew("+5m", 300_000)));
    sc.add_file_node("c-behind-3m", Some(skew("-3m", -180_000)));
    sc.start_all()?;
    sc.idle(Duration::from_secs_f64(opts.minutes * 60.0)).await;

    // The skew as the records show it: a start's clock reading minus the tick it serves.
    let mut lags: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for r in sc.tail.records().iter().filter(|r| r.ev == Ev::Start) {
        lags.entry(r.node.clone())
            .or_default()
            .push(r.t_ms - r.tick.timestamp_millis());
    }
    let mut measured = Vec::new();
    for (node, mut v) in lags {
        v.sort_unstable();
        let median = v[v.len() / 2];
        let expected = sc.offsets.get(&node).copied().unwrap_or(0);
        measured.push(format!(
            "{node} {:+.1} s (configured {:+.0} s)",
            median as f64 / 1000.0,
            expected as f64 / 1000.0
        ));
        if (median - expected).abs() > 30_000 {
            return Err(format!(
                "libfaketime did not skew node {node}: its records read {median} ms after the tick, {expected} ms expected"
            )
            .into());
        }
    }
    sc.notes.push(format!(
        "median record clock minus tick, per node: {}",
        measured.join(", ")
    ));
    sc.finish().await
}
