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
