//! Golden vectors: `tests/data/cron-vectors.tsv` is the referee for fire times and refusals.
//! Its header says which rows are the shared referee's and which `tests/data/cron_reference.py`
//! generated. A missing file fails the test; it never passes silently.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use scheduler::ScheduleSpec;

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/cron-vectors.tsv")
}

fn instant(text: &str, line: &str) -> DateTime<Utc> {
    text.parse()
        .unwrap_or_else(|error| panic!("bad instant `{text}` ({error}) in row: {line}"))
}

#[test]
fn every_vector_and_every_reject_row_holds() {
    let path = vectors_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "cannot read the golden vectors at {}: {error}",
            path.display()
        )
    });

    let mut failures = Vec::new();
    let (mut vectors, mut rejects) = (0, 0);
    for line in text.lines() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let columns: Vec<&str> = line.split('\t').collect();
        if columns[0] == "REJECT" {
            rejects += 1;
            assert_eq!(columns.len(), 2, "malformed REJECT row: {line}");
            match ScheduleSpec::parse(columns[1], "UTC") {
                Ok(_) => failures.push(format!("accepted, should be refused: {line}")),
                Err(error) if error.field().is_none() && !columns[1].starts_with('@') => {
                    // Only whole-expression problems (field count) may leave the field out.
                    let message = error.to_string();
                    if !message.contains("fields") {
                        failures.push(format!("refusal names no field ({message}): {line}"));
                    }
                }
                Err(_) => {}
            }
            continue;
        }

        vectors += 1;
        assert_eq!(columns.len(), 4, "malformed vector row: {line}");
        let (expression, zone) = (columns[0], columns[1]);
        let after = instant(columns[2], line);
        let expected: Vec<DateTime<Utc>> = columns[3]
            .split_whitespace()
            .map(|fire| instant(fire, line))
            .collect();
        let spec = match ScheduleSpec::parse(expression, zone) {
            Ok(spec) => spec,
            Err(error) => {
                failures.push(format!("refused ({error}): {line}"));
                continue;
            }
        };
        let actual: Vec<DateTime<Utc>> = spec.iter_after(after).take(expected.len()).collect();
        if actual != expected {
            let actual: Vec<String> = actual.iter().map(|fire| fire.to_rfc3339()).collect();
            failures.push(format!("got [{}] for row: {line}", actual.join(" ")));
        }
        // `next_after` one at a time must agree with the iterator.
        if spec.next_after(after) != expected.first().copied() {
            failures.push(format!("next_after disagrees for row: {line}"));
        }
    }

    assert!(
        vectors > 0 && rejects > 0,
        "no rows read from {}",
        path.display()
    );
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        vectors + rejects,
        failures.join("\n")
    );
}
