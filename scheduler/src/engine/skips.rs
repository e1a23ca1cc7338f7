//! A skipped tick reported: counted in the metrics and raised as `tick.skipped`.

use crate::events::{EventBus, SchedulerEvent};
use crate::metrics::Metrics;
use crate::store::SkipRecord;

/// Counts skipped ticks and raises `tick.skipped` (to the webhook too unless `local_only`).
pub(crate) fn report_skip(
    metrics: &Metrics,
    events: &EventBus,
    skip: &SkipRecord,
    local_only: bool,
) {
    metrics.ticks_skipped(&skip.task_name, skip.reason.as_str(), skip.ticks);
    let event = SchedulerEvent::from(skip);
    if local_only {
        events.emit_local(event);
    } else {
        events.emit(event);
    }
}
