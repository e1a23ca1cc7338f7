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
    /// The kind of incident the message is about (`run.failed`, `task.missed`, ...): the
    /// alert's own type for a first alert, the incident's for a reminder or a recovery.
    pub incident: Option<String>,
    /// When that incident opened, in the task's zone, with the zone's name.
    pub opened: Option<String>,
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
        let incident = &data["incident"];
        let task = text(&data["task"])
            .or_else(|| text(&run["task"]))
            .or_else(|| text(&incident["task"]));
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
        let in_zone = |t: DateTime<Utc>| {
            format!(
                "{} ({zone})",
                t.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S")
            )
        };
        let instant = |v: &Value| v.as_str().and_then(|t| t.parse::<DateTime<Utc>>().ok());
        // The incident the message is about, and when it opened.
        // (reminders, resolutions and the alerts that open one carry `incident`).
        let (incident_kind, opened) = match kind.as_str() {
            "task.recovered" => (
                Some("task.missed".to_owned()),
                instant(&data["missed_since"]).map(in_zone),
            ),
            _ => (
                text(&incident["kind"]),
                instant(&incident["opened_at"]).map(in_zone),
            ),
        };
        let incident_name = incident_kind
            .clone()
            .unwrap_or_else(|| "incident".to_owned());
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
            "task.recovered" => {
                "recovered: it runs again (its missed-run incident is resolved)".to_owned()
            }
            "incident.reminder" => match incident["count"].as_i64() {
                Some(n) if n > 1 => {
                    format!("still has an open {incident_name} incident ({n} alerts)")
                }
                _ => format!("still has an open {incident_name} incident"),
            },
            "incident.resolved" => match text(&data["reason"]).filter(|r| !r.is_empty()) {
                Some(why) => format!("recovered: its {incident_name} incident is resolved ({why})"),
                None => format!("recovered: its {incident_name} incident is resolved"),
            },
            "task.orphaned" => "is known to neither the config nor any node's code".to_owned(),
            "task.removed" => "was removed from the config (disabled)".to_owned(),
            "config.refused" => "has a config entry that was refused".to_owned(),
            "scheduler.error" => match text(&data["what"]) {
                Some(w) => format!("scheduler error while {w}"),
                None => "scheduler error".to_owned(),
            },
            "tick.skipped" => "skipped ticks".to_owned(),
            "database.failed_over" => crate::events::failover_summary(
                data["server"].as_str().unwrap_or("another server"),
                data["timeline"]
                    .as_u64()
                    .and_then(|t| u32::try_from(t).ok()),
            ),
            other => other.replace(['.', '_'], " "),
        };
        let when = in_zone(at);
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
            incident: incident_kind,
            opened,
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
        let mut facts = Vec::new();
        if let Some(task) = &self.task {
            facts.push(("Task", task.clone()));
        }
        facts.push(("Event", self.kind.clone()));
        if let Some(incident) = &self.incident {
            facts.push(("Incident", incident.clone()));
        }
        if let Some(opened) = &self.opened {
            facts.push(("Opened", opened.clone()));
        }
        facts.push(("When", self.when.clone()));
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
        // One line each: a value cannot start a line of markup of its own.
        for (_, value) in &mut facts {
            if value.contains(['\n', '\r']) {
                *value = value.replace(['\n', '\r'], " ");
            }
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
            text.push_str(&format!(
                "**Error**:\n\n```\n{}\n```\n\n",
                fence_safe(error)
            ));
        }
        if let Some(link) = &self.link {
            text.push_str(&format!("[Open on the dashboard]({link})\n"));
        }
        text
    }
}

/// `text` that cannot close (or open) a Markdown code fence: a zero-width space parts every two
/// backticks in a row, so no run of three (```` ``` ````) is left (the fence's own backticks
/// stand on lines of their own).
pub(crate) fn fence_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '`' && chars.peek() == Some(&'`') {
            out.push('\u{200B}');
        }
    }
    out
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

    fn body(kind: &str, data: serde_json::Value) -> String {
        serde_json::json!({"type": kind, "timestamp": "2026-03-01T02:00:00.000Z", "data": data})
            .to_string()
    }

    #[test]
    fn reminders_and_recoveries_name_the_task_the_incident_and_when_it_opened() {
        let incident = serde_json::json!({"id": 7, "task": "reports.daily", "kind": "run.failed",
            "opened_at": "2026-03-01T00:30:00Z", "last_seen_at": "2026-03-01T01:30:00Z", "count": 4});
        let cases = [
            body(
                "incident.reminder",
                serde_json::json!({"incident": incident, "timezone": "Asia/Shanghai"}),
            ),
            body(
                "incident.resolved",
                serde_json::json!({"incident": incident, "reason": "run 9 succeeded", "timezone": "Asia/Shanghai"}),
            ),
        ];
        for case in cases {
            let alert = Alert::from_body(&case, None).unwrap();
            assert_eq!(alert.task.as_deref(), Some("reports.daily"), "{case}");
            for text in [alert.plain(), alert.markdown("### ")] {
                for needle in [
                    "reports.daily",
                    "run.failed",
                    "2026-03-01 08:30:00 (Asia/Shanghai)",
                ] {
                    assert!(text.contains(needle), "`{needle}` missing in {text}");
                }
            }
            assert!(alert.title().contains("reports.daily"), "{}", alert.title());
        }
        let recovered = body(
            "task.recovered",
            serde_json::json!({"task": "reports.daily", "missed_since": "2026-03-01T00:00:00Z", "run_id": 3}),
        );
        let text = Alert::from_body(&recovered, None).unwrap().plain();
        for needle in [
            "reports.daily",
            "task.missed",
            "Opened: 2026-03-01 00:00:00 (UTC)",
        ] {
            assert!(text.contains(needle), "`{needle}` missing in {text}");
        }
    }

    #[test]
    fn a_failover_says_the_new_server_and_its_timeline() {
        let data = |timeline: serde_json::Value| {
            serde_json::json!({"server": "h2:5432", "previous": "h1:5432", "timeline": timeline,
                "node": "n1", "timezone": "UTC"})
        };
        let alert = Alert::from_body(
            &body("database.failed_over", data(serde_json::json!(3))),
            None,
        )
        .unwrap();
        assert_eq!(
            alert.title(),
            "[scheduler] database failed over: now h2:5432, timeline 3"
        );
        assert_eq!(alert.node.as_deref(), Some("n1"));
        let alert = Alert::from_body(
            &body("database.failed_over", data(serde_json::Value::Null)),
            None,
        )
        .unwrap();
        assert_eq!(
            alert.title(),
            "[scheduler] database failed over: now h2:5432"
        );
    }

    #[test]
    fn an_error_cannot_leave_its_code_block() {
        let hostile = "boom\n```\n# Heading\n[click](https://evil.example)\n````x``";
        let alert = Alert::from_body(
            &body(
                "run.failed",
                serde_json::json!({"task": "t", "error": hostile}),
            ),
            None,
        )
        .unwrap();
        let md = alert.markdown("### ");
        // Exactly one fence opens and one closes: the error's backticks never make three.
        assert_eq!(md.matches("```").count(), 2, "{md}");
        assert!(!fence_safe("a```").contains("``"));
        assert_eq!(fence_safe("plain `code`"), "plain `code`");
    }
}
