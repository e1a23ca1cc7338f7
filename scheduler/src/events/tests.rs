use super::*;

fn started(n: i64) -> SchedulerEvent {
    SchedulerEvent::RunStarted {
        run: RunRef {
            task: "t".into(),
            run_id: n,
            scheduled_at: DateTime::UNIX_EPOCH,
            attempt: 1,
            trigger: "schedule".into(),
            node: "n1".into(),
        },
    }
}

#[tokio::test]
async fn a_slow_subscriber_loses_the_oldest_and_is_told() {
    let bus = EventBus::default();
    let mut slow = bus.subscribe();
    for n in 0..(EVENT_BUFFER as i64 + 10) {
        bus.emit(started(n));
    }
    let first = slow.recv().await.unwrap();
    let SchedulerEvent::RunStarted { run } = first.event else {
        panic!()
    };
    assert_eq!(run.run_id, 10, "the ten oldest were lost");
    assert_eq!(slow.lost(), 10);
    assert_eq!(bus.dropped(), 10);
}

#[tokio::test]
async fn every_event_carries_its_task_s_tags_or_the_defaults_shared_not_copied() {
    let bus = EventBus::default().with_defaults(vec!["oncall".into()], chrono_tz::Europe::Paris);
    let doc = crate::config::ConfigDocument::parse(
        r#"{"tasks": [
                {"name": "t", "enabled": true, "cron": "* * * * *", "owners": ["ann"], "labels": {"team": "ads"},
                 "timezone": "Asia/Shanghai"},
                {"name": "plain", "enabled": true, "cron": "* * * * *"}
            ]}"#,
        crate::config::ConfigFormat::Json,
        "test",
    )
    .unwrap();
    bus.set_document(&doc);
    let mut events = bus.subscribe();
    bus.emit(started(1));
    bus.emit(started(2));
    bus.emit(SchedulerEvent::TaskOrphaned {
        task: "plain".into(),
    });
    bus.emit(SchedulerEvent::InternalError {
        what: "w".into(),
        error: "e".into(),
    });
    let (one, two) = (events.recv().await.unwrap(), events.recv().await.unwrap());
    assert_eq!(one.owners(), ["ann"]);
    assert_eq!(one.labels()["team"], "ads");
    assert_eq!(one.tags.timezone, "Asia/Shanghai");
    assert!(!one.tags.default_owners);
    assert!(
        Arc::ptr_eq(&one.tags, &two.tags),
        "one task's events share its tags"
    );
    for other in [events.recv().await.unwrap(), events.recv().await.unwrap()] {
        assert_eq!(other.owners(), ["oncall"], "{:?}", other.event);
        assert!(other.tags.default_owners);
        assert!(other.labels().is_empty());
        assert_eq!(other.tags.timezone, "Europe/Paris");
    }
}

#[test]
fn the_json_form_carries_the_type() {
    let json = serde_json::to_value(started(7)).unwrap();
    assert_eq!(json["type"], "run.started");
    assert_eq!(json["run"]["run_id"], 7);
    assert!(SchedulerEvent::KINDS.contains(&started(7).kind()));
    for alert in SchedulerEvent::ALERTS {
        assert!(SchedulerEvent::KINDS.contains(alert));
    }
}

#[test]
fn an_instance_has_its_own_owners_and_its_labels_over_its_task_s_and_its_sibling_the_task_s() {
    let bus = EventBus::default().with_defaults(vec!["oncall".into()], chrono_tz::UTC);
    let doc = crate::config::ConfigDocument::parse(
        r#"{"tasks": [{"name": "t", "enabled": true, "cron": "* * * * *", "owners": ["ann"],
                       "labels": {"team": "ads", "tier": "2"}}]}"#,
        crate::config::ConfigFormat::Json,
        "test",
    )
    .unwrap();
    let own = crate::store::InstanceTags::new(
        vec!["bob".into()],
        [("tier".to_owned(), "1".to_owned())].into(),
    );
    // Noted before the document is read: made again with it.
    bus.note_row("t/own", &own, "UTC");
    bus.set_document(&doc);
    let tags = bus.tags_of(Some("t/own"));
    assert_eq!(tags.owners, ["bob"]);
    assert!(!tags.default_owners);
    assert_eq!(tags.labels["team"], "ads", "the task's labels");
    assert_eq!(tags.labels["tier"], "1", "its own win on a key");
    for sibling in ["t/plain", "t", "t[2]"] {
        let tags = bus.tags_of(Some(sibling));
        assert_eq!(tags.owners, ["ann"], "{sibling}");
        assert_eq!(tags.labels["tier"], "2", "{sibling}");
    }
    // Labels alone: the task's owners, its labels over the task's.
    let labels_only =
        crate::store::InstanceTags::new(Vec::new(), [("x".into(), "y".into())].into());
    bus.note_row("t/labelled", &labels_only, "UTC");
    assert_eq!(bus.tags_of(Some("t/labelled")).owners, ["ann"]);
    assert_eq!(bus.tags_of(Some("t/labelled")).labels["x"], "y");
    // Its tags removed from its row: its task's again; a full read replaces what was noted.
    bus.note_row("t/own", &crate::store::InstanceTags::default(), "UTC");
    assert_eq!(bus.tags_of(Some("t/own")).owners, ["ann"]);
    bus.set_rows([("t/own", &own, "UTC")]);
    assert_eq!(bus.tags_of(Some("t/own")).owners, ["bob"]);
    assert_eq!(bus.tags_of(Some("t/labelled")).labels.get("x"), None);
}

#[test]
fn an_instance_s_events_carry_its_own_zone_and_its_sibling_s_its_task_s() {
    let bus = EventBus::default().with_defaults(Vec::new(), chrono_tz::UTC);
    let doc = crate::config::ConfigDocument::parse(
        r#"{"tasks": [{"name": "t", "enabled": true, "cron": "* * * * *", "owners": ["ann"],
                       "timezone": "Europe/Paris"}]}"#,
        crate::config::ConfigFormat::Json,
        "test",
    )
    .unwrap();
    bus.set_document(&doc);
    let none = crate::store::InstanceTags::default();
    bus.note_row("t/sh", &none, "Asia/Shanghai");
    bus.note_row("t/sh2", &none, "Asia/Shanghai");
    bus.note_row("t/paris", &none, "Europe/Paris");
    let own = crate::store::InstanceTags::new(vec!["bob".into()], Default::default());
    bus.note_row("t/bob", &own, "America/New_York");
    assert_eq!(bus.tags_of(Some("t/sh")).timezone, "Asia/Shanghai");
    assert_eq!(
        bus.tags_of(Some("t/sh")).owners,
        ["ann"],
        "its task's owners"
    );
    assert!(
        Arc::ptr_eq(&bus.tags_of(Some("t/sh")), &bus.tags_of(Some("t/sh2"))),
        "instances in one zone share their tags"
    );
    assert_eq!(bus.tags_of(Some("t/paris")).timezone, "Europe/Paris");
    assert_eq!(bus.tags_of(Some("t/bob")).timezone, "America/New_York");
    assert_eq!(bus.tags_of(Some("t/bob")).owners, ["bob"]);
    assert_eq!(
        bus.tags_of(Some("t")).timezone,
        "Europe/Paris",
        "the task's own"
    );
    // A document read again keeps each instance's zone.
    bus.set_document(&doc);
    assert_eq!(bus.tags_of(Some("t/sh")).timezone, "Asia/Shanghai");
    assert_eq!(bus.tags_of(Some("t/bob")).timezone, "America/New_York");
    // Moved back to its task's zone: its task's tags.
    bus.note_row("t/sh", &none, "Europe/Paris");
    assert!(Arc::ptr_eq(
        &bus.tags_of(Some("t/sh")),
        &bus.tags_of(Some("t"))
    ));
}
