use super::*;

#[test]
fn owners_and_labels_are_checked_and_carried() {
    let doc = ConfigDocument::from_json(
        r#"{"tasks":[
                {"name":"a","enabled":true,"cron":"0 * * * * *",
                 "owners":["ops@example.com","@li.lei"],"labels":{"team":"ads","tier":"1"}},
                {"name":"b","enabled":true,"cron":"0 * * * * *",
                 "owners":["x@example.com"," ","x@example.com"],"labels":{"bad key":"v"}}
            ]}"#,
    )
    .unwrap();
    let v = validate(&doc, &TaskRegistry::default(), chrono_tz::UTC);
    let reasons: Vec<String> = v
        .refused
        .iter()
        .filter(|r| r.name == "b")
        .map(|r| r.reason.to_string())
        .collect();
    assert!(
        reasons.iter().any(|r| r == "invalid owner ` `: is blank"),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r == "invalid owner `x@example.com`: is listed twice"),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("invalid label `bad key`")),
        "{reasons:?}"
    );
    // `a` is refused only as unregistered: its owners and labels are fine.
    let a: Vec<&Refusal> = v.refused.iter().filter(|r| r.name == "a").collect();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].reason, RefusalReason::UnknownTask);
}

#[test]
fn shards_are_a_count_or_nodes() {
    let doc = ConfigDocument::parse(
        "tasks:\n\
             - {name: a, enabled: true, cron: '0 * * * * *', shards: nodes}\n\
             - {name: b, enabled: true, cron: '0 * * * * *', shards: 4}\n\
             - {name: c, enabled: true, cron: '0 * * * * *', shards: all}\n\
             - {name: d, enabled: true, cron: '0 * * * * *', shards: 0}\n\
             - {name: e, enabled: true, cron: '0 * * * * *', shards: -1}\n\
             - {name: f, enabled: true, cron: '0 * * * * *', shards: 1.5}\n",
        super::super::ConfigFormat::Yaml,
        "tasks.yaml",
    )
    .unwrap();
    let v = validate(&doc, &TaskRegistry::default(), chrono_tz::UTC);
    let shard_reasons = |name: &str| -> Vec<String> {
        v.refused
            .iter()
            .filter(|r| r.name == name && matches!(r.reason, RefusalReason::InvalidShards(_)))
            .map(|r| r.reason.to_string())
            .collect()
    };
    assert!(shard_reasons("a").is_empty());
    assert!(shard_reasons("b").is_empty());
    for (name, shown) in [("c", "all"), ("d", "0"), ("e", "-1"), ("f", "1.5")] {
        assert_eq!(
            shard_reasons(name),
            [format!(
                "`shards` must be a count from 1 to 1000 or `nodes` (one run on each live \
                     node), not `{shown}`"
            )],
        );
    }
}

#[test]
fn jitter_is_a_duration_up_to_a_day() {
    let doc = ConfigDocument::parse(
        "tasks:\n\
             - {name: a, enabled: true, cron: '0 * * * * *', jitter: 30s}\n\
             - {name: b, enabled: true, cron: '0 * * * * *', jitter: 2days}\n\
             - {name: c, enabled: true, cron: '0 * * * * *', jitter: soon}\n",
        super::super::ConfigFormat::Yaml,
        "tasks.yaml",
    )
    .unwrap();
    let v = validate(&doc, &TaskRegistry::default(), chrono_tz::UTC);
    let reasons = |name: &str| -> Vec<String> {
        v.refused
            .iter()
            .filter(|r| r.name == name && matches!(r.reason, RefusalReason::InvalidJitter(_)))
            .map(|r| r.reason.to_string())
            .collect()
    };
    assert!(reasons("a").is_empty());
    assert!(
        reasons("b")[0].contains("`jitter`: 2days is out of range; accepted: from 0s to 1day"),
        "{:?}",
        reasons("b")
    );
    assert!(
        reasons("c")[0].contains("`soon` is not a duration"),
        "{:?}",
        reasons("c")
    );
    assert_eq!(
        jitter_window("1m 30s"),
        Ok(std::time::Duration::from_secs(90))
    );
}

#[test]
fn limits_are_checked_and_entries_naming_a_bad_or_undeclared_one_refused() {
    for (text, format) in [
        (
            r#"{"limits": {"db": 2, "zero": 0, "bad name": 1, "huge": 100001},
                "tasks": [{"name": "a", "enabled": true, "cron": "0 * * * * *", "limit": "db"},
                          {"name": "b", "enabled": true, "cron": "0 * * * * *", "limit": "zero"},
                          {"name": "c", "enabled": true, "cron": "0 * * * * *", "limit": "nope"}]}"#,
            super::super::ConfigFormat::Json,
        ),
        (
            "limits = { db = 2, zero = 0, \"bad name\" = 1, huge = 100001 }\n\
             [[tasks]]\nname = \"a\"\nenabled = true\ncron = \"0 * * * * *\"\nlimit = \"db\"\n\
             [[tasks]]\nname = \"b\"\nenabled = true\ncron = \"0 * * * * *\"\nlimit = \"zero\"\n\
             [[tasks]]\nname = \"c\"\nenabled = true\ncron = \"0 * * * * *\"\nlimit = \"nope\"\n",
            super::super::ConfigFormat::Toml,
        ),
        (
            "limits: {db: 2, zero: 0, bad name: 1, huge: 100001}\n\
             tasks:\n\
             - {name: a, enabled: true, cron: '0 * * * * *', limit: db}\n\
             - {name: b, enabled: true, cron: '0 * * * * *', limit: zero}\n\
             - {name: c, enabled: true, cron: '0 * * * * *', limit: nope}\n",
            super::super::ConfigFormat::Yaml,
        ),
    ] {
        let doc = ConfigDocument::parse(text, format, "tasks").unwrap();
        let v = validate(&doc, &TaskRegistry::default(), chrono_tz::UTC);
        assert_eq!(v.limits, BTreeMap::from([("db".to_owned(), 2)]), "{format}");
        let problems = v.limit_problems.join("\n");
        assert!(
            problems.contains("`limits.zero`: 0 is out of range; accepted: from 1 to 100000"),
            "{problems}"
        );
        assert!(problems.contains("`limits.huge`: 100001"), "{problems}");
        assert!(problems.contains("limit `bad name`"), "{problems}");
        assert!(!v.is_clean());
        let reasons = |name: &str| -> Vec<String> {
            v.refused
                .iter()
                .filter(|r| r.name == name && r.reason != RefusalReason::UnknownTask)
                .map(|r| r.reason.to_string())
                .collect()
        };
        assert!(reasons("a").is_empty(), "{:?}", reasons("a"));
        assert_eq!(
            reasons("b"),
            [
                "its limit is refused: `limits.zero`: 0 is out of range; accepted: from 1 to 100000 (a limit's size is how many runs may hold it at once)"
            ]
        );
        assert_eq!(
            reasons("c"),
            [
                "limit `nope` is not declared in the document's `limits` (it declares db); declare it with its size (`limits: {nope: 2}`)"
            ]
        );
    }
}
