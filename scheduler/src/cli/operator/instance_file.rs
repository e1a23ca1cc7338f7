//! The file `instances upsert-many` reads: a JSON list of instances, each an item of the admin
//! API's batch route (`PUT /api/tasks/{name}/instances`) with the same fields and no others,
//! read from a path or stdin and made into [`Schedule`]s of the command's task. This module only
//! reads and checks the file's shape; it opens no store and writes nothing (`instances.rs`
//! writes what it reads, and the store refuses what the fields' values do not allow).

use serde::Deserialize;
use serde_json::Value;

use super::target::fail;
use crate::Schedule;

/// One instance of `upsert-many`'s file: an item of the admin API's batch route
/// (`PUT /api/tasks/{name}/instances`), the same fields, no others.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileItem {
    pub(super) key: String,
    /// Required; an item without one is refused alone, as the API refuses it.
    cron: Option<String>,
    timezone: Option<String>,
    args: Option<Value>,
    owners: Option<Vec<String>>,
    labels: Option<std::collections::BTreeMap<String, String>>,
    limit: Option<String>,
    sla: Option<crate::config::TaskSla>,
    pub(super) calendar: Option<String>,
}

impl FileItem {
    /// The instance of `task` this item describes, with the fields it gives.
    pub(super) fn schedule(&self, task: &str) -> Schedule {
        let mut schedule = Schedule::new(task, &self.key);
        if let Some(cron) = &self.cron {
            schedule = schedule.cron(cron);
        }
        if let Some(zone) = &self.timezone {
            schedule = schedule.timezone(zone);
        }
        if let Some(args) = &self.args {
            schedule = schedule.args(args.clone());
        }
        if let Some(owners) = &self.owners {
            schedule = schedule.owners(owners.iter().cloned());
        }
        if let Some(labels) = &self.labels {
            schedule = schedule.labels(labels.clone());
        }
        if let Some(limit) = &self.limit {
            schedule = schedule.limit(limit);
        }
        if let Some(sla) = &self.sla {
            schedule = schedule.sla(sla.clone());
        }
        if let Some(calendar) = &self.calendar {
            schedule = schedule.calendar(calendar);
        }
        schedule
    }
}

/// The items of the file at `path` (`-`: stdin), or why it cannot be read.
pub(super) fn read_items(path: &std::path::Path) -> crate::Result<Vec<FileItem>> {
    let shown = path.display();
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|e| fail(format!("cannot read {shown}: {e}")))?;
    parse_items(&text, &shown.to_string())
}

/// The items of `text`, the file `shown`, or why they are not a list of instances.
fn parse_items(text: &str, shown: &str) -> crate::Result<Vec<FileItem>> {
    serde_json::from_str(text).map_err(|e| {
        fail(format!(
            "{shown} is not a JSON list of instances ({{\"key\", \"cron\", \"timezone\", \"args\", \"owners\", \"labels\", \"limit\", \"sla\", \"calendar\"}}): {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_item_is_the_schedule_of_the_fields_it_gives() {
        let text = r#"[
            {"key": "t1", "cron": "0 0 * * * *", "timezone": "Asia/Shanghai",
             "args": {"tenant": 1}, "owners": ["a@example.com"], "labels": {"tier": "gold"},
             "limit": "db", "calendar": "blackout"},
            {"key": "t2"}
        ]"#;
        let items = parse_items(text, "f.json").unwrap();
        assert_eq!(
            items[0].schedule("sync"),
            Schedule::new("sync", "t1")
                .cron("0 0 * * * *")
                .timezone("Asia/Shanghai")
                .args(json!({"tenant": 1}))
                .owners(["a@example.com"])
                .label("tier", "gold")
                .limit("db")
                .calendar("blackout")
        );
        // No cron: read, and left to be refused alone when written.
        assert_eq!(items[1].schedule("sync"), Schedule::new("sync", "t2"));
    }

    #[test]
    fn a_file_that_is_not_a_list_of_instances_is_refused_naming_the_fields() {
        for text in [
            r#"{"key": "t1"}"#,
            r#"[{"key": "t1", "crn": "x"}]"#,
            "[{}]",
            "nope",
        ] {
            let e = parse_items(text, "f.json").unwrap_err().to_string();
            assert!(
                e.contains("f.json is not a JSON list of instances") && e.contains("\"calendar\""),
                "{text}: {e}"
            );
        }
    }
}
