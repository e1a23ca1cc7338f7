use crate::ticks::starts::tests::{run, starts};

use super::*;

/// The view serializes a run's start beside its tick; a run it cannot place has none.
#[test]
fn a_placed_run_shows_its_start_beside_its_tick() {
    let starts = starts();
    let scheduled = run("t", 10, None, Trigger::Schedule);
    let start = starts.start(&scheduled).unwrap();
    let view = serde_json::to_value(RunView::placed(scheduled.clone(), &starts)).unwrap();
    assert_eq!(
        view["scheduled_at"],
        serde_json::json!(scheduled.scheduled_at)
    );
    assert_eq!(view["starts_at"], serde_json::json!(start));
    let manual = serde_json::to_value(RunView::placed(
        run("t", 10, None, Trigger::Manual),
        &starts,
    ))
    .unwrap();
    assert!(manual.get("starts_at").is_none(), "{manual}");
}
