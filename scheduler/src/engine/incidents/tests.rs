use super::*;
use crate::store::{IncidentRecord, Snooze};
use chrono::DateTime;

fn open(count: i64, key: &str, sent: bool) -> IncidentRecord {
    IncidentRecord {
        id: 1,
        task_name: "t".into(),
        kind: "run.failed".into(),
        opened_at: DateTime::UNIX_EPOCH,
        last_seen_at: DateTime::UNIX_EPOCH,
        count,
        last_key: Some(key.into()),
        summary: "{}".into(),
        notified_at: sent.then_some(DateTime::UNIX_EPOCH),
        remind_every_ms: None,
        reminded_at: None,
        reminders: 0,
        closed_at: None,
        closed_by: None,
    }
}

fn input<'a>(
    fold: &'a AlertFold,
    open: Option<&'a IncidentRecord>,
    snoozed: Option<&'a Snooze>,
) -> FoldInput<'a> {
    FoldInput {
        fold,
        open,
        snoozed,
        now: DateTime::UNIX_EPOCH,
    }
}

#[test]
fn the_first_alert_is_sent_and_repeats_fold() {
    let fold = AlertFold::new("t", "run.failed", "{}").key("run 2");
    assert_eq!(
        decide(&input(&fold, None, None)),
        FoldDecision::Record { notify: true }
    );
    let sent = open(1, "run 1", true);
    assert_eq!(
        decide(&input(&fold, Some(&sent), None)),
        FoldDecision::Record { notify: false }
    );
    let same = open(1, "run 2", true);
    assert_eq!(
        decide(&input(&fold, Some(&same), None)),
        FoldDecision::Duplicate
    );
}

#[test]
fn the_nth_failure_in_a_row_is_sent_and_a_snooze_holds_it() {
    let fold = AlertFold::new("t", "run.failed", "{}")
        .key("run 3")
        .policy(3, None);
    assert_eq!(
        decide(&input(&fold, None, None)),
        FoldDecision::Record { notify: false }
    );
    let one = open(1, "run 1", false);
    assert_eq!(
        decide(&input(&fold, Some(&one), None)),
        FoldDecision::Record { notify: false }
    );
    let two = open(2, "run 2", false);
    assert_eq!(
        decide(&input(&fold, Some(&two), None)),
        FoldDecision::Record { notify: true }
    );
    let snooze = Snooze::new("t", DateTime::UNIX_EPOCH, "deploy", "ops");
    assert_eq!(
        decide(&input(&fold, Some(&two), Some(&snooze))),
        FoldDecision::Record { notify: false }
    );
}
