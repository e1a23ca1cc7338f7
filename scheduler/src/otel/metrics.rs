//! The node's metrics as OpenTelemetry instruments: counters and gauges read from the very
//! registry `/metrics` encodes (its text exposition read back) each time the exporter collects.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;

use crate::metrics::Metrics;
use prometheus_client::metrics::MetricType;

/// One family of the registry's text exposition: its kind and its samples.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    help: String,
    samples: Vec<(Vec<KeyValue>, f64)>,
}

/// The families of an OpenMetrics text exposition, by name (histograms' samples left out).
fn read_exposition(text: &str) -> HashMap<String, Family> {
    let mut families: HashMap<String, Family> = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some((name, kind)) = rest.split_once(' ') {
                families.entry(name.to_owned()).or_default().kind = kind.trim().to_owned();
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            if let Some((name, help)) = rest.split_once(' ') {
                families.entry(name.to_owned()).or_default().help = help.trim().to_owned();
            }
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let Some((sample, labels, value)) = read_sample(line) else {
            continue;
        };
        // A counter's sample is `<family>_total`; a gauge's is the family's own name.
        let family = match sample.strip_suffix("_total") {
            Some(family) if families.get(family).is_some_and(|f| f.kind == "counter") => family,
            _ => sample,
        };
        if let Some(f) = families.get_mut(family)
            && matches!(f.kind.as_str(), "counter" | "gauge")
        {
            f.samples.push((labels, value));
        }
    }
    families
}

/// `name{k="v",...} value` (or `name value`), label values unescaped.
fn read_sample(line: &str) -> Option<(&str, Vec<KeyValue>, f64)> {
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => break i,
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.push(KeyValue::new(std::mem::take(&mut key), value));
                }
                other => key.push(other),
            }
        };
        rest = &inner[end + 1..];
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some((name, labels, value))
}

/// The families of one reading of the exposition, by name.
type Families = Arc<HashMap<String, Family>>;

/// The registry's exposition, read at most once per collection however many instruments ask.
struct Exposition {
    metrics: Arc<Metrics>,
    last: Mutex<Option<(Instant, Families)>>,
}

impl Exposition {
    /// Callbacks of one collection run one after the other: within this, they share one read.
    const FRESH: Duration = Duration::from_millis(500);

    fn families(&self) -> Families {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, families)) = last.as_ref()
            && at.elapsed() < Self::FRESH
        {
            return Arc::clone(families);
        }
        let families = Arc::new(read_exposition(&self.metrics.encode()));
        *last = Some((Instant::now(), Arc::clone(&families)));
        families
    }
}

/// Registers an observable instrument on `meter` for each counter and gauge of the node's
/// registry, reading its samples when the exporter collects; the histograms are recorded by
/// [`Metrics`] itself.
pub(super) fn observe_registry(meter: &opentelemetry::metrics::Meter, metrics: &Arc<Metrics>) {
    let exposition = Arc::new(Exposition {
        metrics: Arc::clone(metrics),
        last: Mutex::new(None),
    });
    for family in metrics.families() {
        let (name, help) = (family.name, family.help);
        let read = Arc::clone(&exposition);
        match family.kind {
            MetricType::Counter => {
                meter
                    .u64_observable_counter(name)
                    .with_description(help)
                    .with_callback(move |observer| {
                        if let Some(f) = read.families().get(name) {
                            for (labels, value) in &f.samples {
                                observer.observe(*value as u64, labels);
                            }
                        }
                    })
                    .build();
            }
            MetricType::Gauge => {
                meter
                    .f64_observable_gauge(name)
                    .with_description(help)
                    .with_callback(move |observer| {
                        if let Some(f) = read.families().get(name) {
                            for (labels, value) in &f.samples {
                                observer.observe(*value, labels);
                            }
                        }
                    })
                    .build();
            }
            _ => {}
        }
    }
    metrics.record_histograms_to(meter);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_reads_back_as_counters_and_gauges() {
        let m = Metrics::new();
        let now = chrono::Utc::now();
        m.run_started("sync", now, "schedule", now);
        m.run_ended("sync", "failed", "schedule", 0.2, true, now);
        m.ticks_skipped("sync", "overlap", 3);
        let families = read_exposition(&m.encode());
        let runs = &families["scheduler_task_runs"];
        assert_eq!(runs.kind, "counter");
        assert_eq!(runs.samples.len(), 1);
        let (labels, value) = &runs.samples[0];
        assert_eq!(*value, 1.0);
        let labels: Vec<(String, String)> = labels
            .iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect();
        assert_eq!(
            labels,
            [
                ("task".to_owned(), "sync".to_owned()),
                ("outcome".to_owned(), "failed".to_owned()),
                ("trigger".to_owned(), "schedule".to_owned())
            ]
        );
        assert_eq!(families["scheduler_task_ticks_skipped"].samples[0].1, 3.0);
        assert_eq!(families["scheduler_task_running"].kind, "gauge");
        assert_eq!(families["scheduler_task_running"].samples[0].1, 0.0);
        assert!(
            families["scheduler_task_run_duration_seconds"]
                .samples
                .is_empty()
        );
        assert_eq!(families["scheduler_build_info"].samples[0].1, 1.0);
    }

    #[test]
    fn label_values_are_unescaped() {
        let (name, labels, value) = read_sample(r#"m_total{a="x\"y\\z",b="1"} 2.5"#).unwrap();
        assert_eq!(name, "m_total");
        assert_eq!(labels[0].value.to_string(), "x\"y\\z");
        assert_eq!(labels[1].key.to_string(), "b");
        assert_eq!(value, 2.5);
        assert_eq!(read_sample("m 7").unwrap().2, 7.0);
    }
}
