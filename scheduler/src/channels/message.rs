//! An alert as people read it, made from the event's webhook body: the task, what happened,
//! when (in the task's zone), the node, the error's first lines, the owners and labels, and a
//! link to the run (or the task) on the dashboard when the node knows its public URL.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// Lines of an error a message keeps.
const ERROR_LINES: usize = 8;
/// Characters of an error a message keeps.
const ERROR_CHARS: usize = 1500;

/// An alert, ready to be written in a channel's format.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Alert {
    /// The event type (`run.failed`, ...).
    pub kind: String,
    /// The task, if the event is about one.
    pub task: Option<String>,
    /// What happened, in a few words (`failed`, `missed its 08:00 run`, ...).
    pub what: String,
    /// When, in the task's zone, with the zone's name.
    pub when: String,
    /// The node that ran it or saw it.
    pub node: Option<String>,
    /// The error's first lines, if any.
    pub error: Option<String>,
    /// Who answers for the task.
    pub owners: Vec<String>,
    /// The task's labels, as `key=value`.
    pub labels: Vec<String>,
    /// The run, if the event is about one.
    pub run_id: Option<i64>,
    /// The run's (or the task's) page on the dashboard.
    pub link: Option<String>,
}

impl Alert {
    /// Reads a webhook body (`{type, timestamp, data}`); `public_url` is the dashboard's base.
    pub fn from_body(body: &str, public_url: Option<&str>) -> Result<Self, String> {
        let body: Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
        let kind = body["type"].as_str().ok_or("no `type`")?.to_owned();
        let data = &body["data"];
        let at: DateTime<Utc> = body["timestamp"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .ok_or("no `timestamp`")?;
        let zone: chrono_tz::Tz = data["timezone"]
            .as_str()
            .and_then(|z| z.parse().ok())
            .unwrap_or(chrono_tz::UTC);
        let text = |v: &Value| v.as_str().map(str::to_owned);
        let run = &data["run"];
        let task = text(&data["task"]).or_else(|| text(&run["task"]));
        let node = text(&run["node"])
            .or_else(|| text(&data["previous_owner"]).map(|n| format!("{n} (lost)")))
            .or_else(|| text(&data["node"]));
        let error = text(&data["error"])
            .or_else(|| text(&data["reason"]))
            .map(|e| first_lines(&e));
        let local = |v: &Value| {
            v.as_str()
                .and_then(|t| t.parse::<DateTime<Utc>>().ok())
                .map(|t| {
                    t.with_timezone(&zone)
                        .format("%Y-%m-%d %H:%M:%S")
                        .to_string()
                })
        };
        let attempt = run["attempt"].as_i64().filter(|a| *a > 1);
        let what = match kind.as_str() {
            "run.failed" => match attempt {
                Some(a) => format!("failed (attempt {a})"),
                None => "failed".to_owned(),
            },
            "run.timed_out" => "timed out".to_owned(),
            "run.abandoned" => "was abandoned (at most once: not run again)".to_owned(),
            "run.cancelled" => "was cancelled".to_owned(),
            "run.interrupted" => "was interrupted".to_owned(),
            "run.lost" => "lost its node".to_owned(),
            "run.started" => "started".to_owned(),
            "run.succeeded" => "succeeded".to_owned(),
            "run.retry_scheduled" => "will be retried".to_owned(),
            "task.missed" => match local(&data["expected_at"]) {
                Some(t) => format!("missed its run due at {t}"),
                None => "missed a run".to_owned(),
            },
            "task.recovered" => "recovered: it runs again".to_owned(),
            "task.orphaned" => "is known to neither the config nor any node's code".to_owned(),
            "task.removed" => "was removed from the config (disabled)".to_owned(),
            "config.refused" => "has a config entry that was refused".to_owned(),
            "scheduler.error" => match text(&data["what"]) {
                Some(w) => format!("scheduler error while {w}"),
                None => "scheduler error".to_owned(),
            },
            "tick.skipped" => "skipped ticks".to_owned(),
            other => other.replace(['.', '_'], " "),
        };
        let when = format!(
            "{} ({zone})",
            at.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S")
        );
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let labels = data["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        let run_id = run["run_id"].as_i64().or_else(|| data["run_id"].as_i64());
        let link = public_url.map(|base| {
            let base = base.trim_end_matches('/');
            match (run_id, &task) {
                (Some(id), _) => format!("{base}/#/run/{id}"),
                (None, Some(task)) => format!(
                    "{base}/#/task/{}",
                    percent_encoding::utf8_percent_encode(task, percent_encoding::NON_ALPHANUMERIC)
                ),
                (None, None) => format!("{base}/"),
            }
        });
        Ok(Self {
            kind,
            task,
            what,
            when,
            node,
            error,
            owners: strings(&data["owners"]),
            labels,
            run_id,
            link,
        })
    }

    /// One line: `reports.daily failed`.
    pub fn title(&self) -> String {
        match &self.task {
            Some(task) => format!("[scheduler] {task} {}", self.what),
            None => format!("[scheduler] {}", self.what),
        }
    }

    /// The facts as `(label, value)` pairs, in order (the error and the link apart).
    pub fn facts(&self) -> Vec<(&'static str, String)> {
        let mut facts = vec![("Event", self.kind.clone()), ("When", self.when.clone())];
        if let Some(task) = &self.task {
            facts.insert(0, ("Task", task.clone()));
        }
        if let Some(run) = self.run_id {
            facts.push(("Run", run.to_string()));
        }
        if let Some(node) = &self.node {
            facts.push(("Node", node.clone()));
        }
        if !self.owners.is_empty() {
            facts.push(("Owners", self.owners.join(", ")));
        }
        if !self.labels.is_empty() {
            facts.push(("Labels", self.labels.join(", ")));
        }
        facts
    }

    /// The whole alert as plain text (mail, text messages).
    pub fn plain(&self) -> String {
        let mut text = format!("{}\n\n", self.title());
        for (label, value) in self.facts() {
            text.push_str(&format!("{label}: {value}\n"));
        }
        if let Some(error) = &self.error {
            text.push_str(&format!("\nError:\n{error}\n"));
        }
        if let Some(link) = &self.link {
            text.push_str(&format!("\n{link}\n"));
        }
        text
    }

    /// The whole alert as Markdown (`**label**: value` lines, the error in a code block).
    pub fn markdown(&self, heading: &str) -> String {
        let mut text = format!("{heading}{}\n\n", self.title());
        for (label, value) in self.facts() {
            text.push_str(&format!("**{label}**: {value}\n\n"));
        }
        if let Some(error) = &self.error {
            text.push_str(&format!("**Error**:\n\n```\n{error}\n```\n\n"));
        }
        if let Some(link) = &self.link {
            text.push_str(&format!("[Open on the dashboard]({link})\n"));
        }
        text
    }
}

/// The first [`ERROR_LINES`] lines, at most [`ERROR_CHARS`] characters, `…` when cut.
fn first_lines(error: &str) -> String {
    let mut lines: Vec<&str> = error.lines().take(ERROR_LINES).collect();
    let cut_lines = error.lines().count() > ERROR_LINES;
    if lines.is_empty() {
        lines.push("");
    }
    let mut text = lines.join("\n");
    let mut cut = cut_lines;
    if text.chars().count() > ERROR_CHARS {
        text = text.chars().take(ERROR_CHARS).collect();
        cut = true;
    }
    if cut {
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_names_task_time_in_its_zone_node_error_and_link() {
        let body = serde_json::json!({
            "type": "run.failed",
            "timestamp": "2026-03-01T00:30:00.000Z",
            "data": {
                "run": {"task": "reports.daily", "run_id": 42, "attempt": 1, "node": "n1",
                        "scheduled_at": "2026-03-01T00:30:00Z", "trigger": "schedule"},
                "error": (1..=20).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n"),
                "duration_ms": 5,
                "owners": ["alice@example.com"],
                "labels": {"team": "ads"},
                "timezone": "Asia/Shanghai",
            },
        })
        .to_string();
        let alert = Alert::from_body(&body, Some("https://sched.example.com/")).unwrap();
        assert_eq!(alert.title(), "[scheduler] reports.daily failed");
        assert_eq!(alert.when, "2026-03-01 08:30:00 (Asia/Shanghai)");
        assert_eq!(alert.node.as_deref(), Some("n1"));
        assert_eq!(
            alert.link.as_deref(),
            Some("https://sched.example.com/#/run/42")
        );
        let error = alert.error.clone().unwrap();
        assert!(
            error.starts_with("line 1\n") && error.ends_with("line 8…"),
            "{error}"
        );
        let text = alert.plain();
        assert!(text.contains("Owners: alice@example.com") && text.contains("Labels: team=ads"));
        assert!(Alert::from_body(&body, None).unwrap().link.is_none());
    }
}
