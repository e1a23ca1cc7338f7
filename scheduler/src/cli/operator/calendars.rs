//! The config document whose `calendars` an instance made from the command line may name
//! (`instances upsert --calendar`, `upsert-many`'s `calendar`): read once from `--config`, else
//! from `SCHEDULER_CONFIG` (with its token and headers), as a node reads it.

use std::sync::Arc;

use super::target::fail;
use crate::config::{ConfigDocument, ConfigSettings, PollOutcome};

/// The document at `location` (`None`: `SCHEDULER_CONFIG`'s), read once; why not, if it cannot
/// be (none given, unreadable, not a document).
pub(super) async fn document(location: Option<&str>) -> crate::Result<Arc<ConfigDocument>> {
    let settings = match location {
        Some(location) => ConfigSettings::new(location),
        None => {
            let lookup = crate::env::process;
            match ConfigSettings::from_reader(&crate::env::Env::new(&lookup)) {
                Ok(Some(settings)) => settings,
                Ok(None) => {
                    return Err(fail(
                        "a calendar is one of the config document's `calendars`: give the document with --config (or SCHEDULER_CONFIG)",
                    ));
                }
                Err(e) => return Err(fail(e.to_string())),
            }
        }
    };
    let mut watcher = settings.watcher()?;
    match watcher.poll_once().await {
        PollOutcome::Changed(doc) => Ok(doc),
        PollOutcome::Failed(e) => Err(fail(format!(
            "cannot read the config document for its calendars: {e}"
        ))),
        PollOutcome::Unchanged => watcher
            .current()
            .ok_or_else(|| fail("the config document could not be read")),
    }
}
