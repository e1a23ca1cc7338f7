//! Parsing the config document: the three formats, refusal of unknown fields, positions in errors,
//! format detection.

use scheduler::config::{ConfigDocument, ConfigError, ConfigFormat, RawConfig, TaskConfig};

const JSON: &str = r#"{
  "version": 3,
  "tasks": [
    {"name": "syncAdvertiserReport", "enabled": true, "cron": "0 */5 * * * *", "timezone": "Asia/Shanghai"},
    {"name": "purgeSessions", "enabled": false, "cron": "0 0 3 * * *"}
  ]
}"#;

const TOML: &str = r#"
version = 3

[[tasks]]
name = "syncAdvertiserReport"
enabled = true
cron = "0 */5 * * * *"
timezone = "Asia/Shanghai"

[[tasks]]
name = "purgeSessions"
enabled = false
cron = "0 0 3 * * *"
"#;

const YAML: &str = r#"
version: 3
tasks:
  - name: syncAdvertiserReport
    enabled: true
    cron: "0 */5 * * * *"
    timezone: Asia/Shanghai
  - name: purgeSessions
    enabled: false
    cron: 0 0 3 * * *
"#;

fn expected() -> ConfigDocument {
    ConfigDocument {
        version: Some(3),
        calendars: Default::default(),
        limits: Default::default(),
        tasks: vec![
            TaskConfig {
                name: "syncAdvertiserReport".into(),
                enabled: true,
                cron: "0 */5 * * * *".into(),
                timezone: Some("Asia/Shanghai".into()),
                ..Default::default()
            },
            TaskConfig {
                name: "purgeSessions".into(),
                enabled: false,
                cron: "0 0 3 * * *".into(),
                timezone: None,
                ..Default::default()
            },
        ],
    }
}

#[test]
fn json_toml_and_yaml_are_equivalent() {
    for (text, format) in [
        (JSON, ConfigFormat::Json),
        (TOML, ConfigFormat::Toml),
        (YAML, ConfigFormat::Yaml),
    ] {
        let doc = ConfigDocument::parse(text, format, "t").unwrap();
        assert_eq!(doc, expected(), "{format}");
        // Sniffing finds the same format.
        assert_eq!(ConfigFormat::sniff(text), format);
        assert_eq!(RawConfig::new(text).parse("t").unwrap(), expected());
    }
    assert_eq!(ConfigDocument::from_json(JSON).unwrap(), expected());
}

#[test]
fn version_is_optional_and_tasks_may_be_empty() {
    let doc = ConfigDocument::parse(r#"{"tasks": []}"#, ConfigFormat::Json, "t").unwrap();
    assert_eq!(doc, ConfigDocument::default());
    let doc = ConfigDocument::parse("tasks = []", ConfigFormat::Toml, "t").unwrap();
    assert_eq!(doc, ConfigDocument::default());
    let doc = ConfigDocument::parse("tasks: []", ConfigFormat::Yaml, "t").unwrap();
    assert_eq!(doc, ConfigDocument::default());
}

#[test]
fn missing_tasks_is_an_error_not_an_empty_config() {
    for (text, format) in [
        ("{}", ConfigFormat::Json),
        ("", ConfigFormat::Toml),
        ("version: 1", ConfigFormat::Yaml),
    ] {
        let err = ConfigDocument::parse(text, format, "t").unwrap_err();
        assert!(err.to_string().contains("tasks"), "{format}: {err}");
    }
}

fn assert_unknown_field(err: &ConfigError, field: &str, source: &str) {
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("unknown field `{field}`")),
        "{shown}"
    );
    assert!(shown.contains(source), "{shown}");
    assert!(err.is_parse());
    assert_eq!(err.source_name(), Some(source));
}

#[test]
fn unknown_fields_are_refused_by_name_in_every_format() {
    let json = r#"{"tasks":[{"name":"a","enable":true,"enabled":true,"cron":"* * * * * *"}]}"#;
    let err = ConfigDocument::parse(json, ConfigFormat::Json, "tasks.json").unwrap_err();
    assert_unknown_field(&err, "enable", "tasks.json");

    let toml = "[[tasks]]\nname = \"a\"\nenable = true\nenabled = true\ncron = \"* * * * * *\"\n";
    let err = ConfigDocument::parse(toml, ConfigFormat::Toml, "tasks.toml").unwrap_err();
    assert_unknown_field(&err, "enable", "tasks.toml");

    let yaml =
        "tasks:\n  - name: a\n    enable: true\n    enabled: true\n    cron: '* * * * * *'\n";
    let err = ConfigDocument::parse(yaml, ConfigFormat::Yaml, "tasks.yaml").unwrap_err();
    assert_unknown_field(&err, "enable", "tasks.yaml");

    // Top level too.
    let err = ConfigDocument::parse(r#"{"tasks":[],"tsks":[]}"#, ConfigFormat::Json, "t.json")
        .unwrap_err();
    assert_unknown_field(&err, "tsks", "t.json");
}

/// Also covers what the issue worried about: `enable` must not silently mean "disabled".
#[test]
fn missing_enabled_is_an_error() {
    let err = ConfigDocument::parse(
        r#"{"tasks":[{"name":"a","cron":"* * * * * *"}]}"#,
        ConfigFormat::Json,
        "t",
    )
    .unwrap_err();
    assert!(err.to_string().contains("missing field `enabled`"), "{err}");
}

fn position(err: &ConfigError) -> (Option<usize>, Option<usize>) {
    match err {
        ConfigError::Parse { line, column, .. } => (*line, *column),
        other => panic!("not a parse error: {other}"),
    }
}

#[test]
fn parse_errors_give_line_and_column() {
    // Line 3 has the typo'd field in every format.
    let json = "{\"tasks\": [\n  {\"name\": \"a\", \"enabled\": true, \"cron\": \"x\",\n   \"enable\": true}\n]}";
    let err = ConfigDocument::parse(json, ConfigFormat::Json, "tasks.json").unwrap_err();
    assert_eq!(position(&err).0, Some(3), "{err}");
    assert!(
        err.to_string()
            .starts_with("tasks.json: invalid JSON config at line 3, column ")
    );

    let toml = "[[tasks]]\nname = \"a\"\nenable = true\n";
    let err = ConfigDocument::parse(toml, ConfigFormat::Toml, "tasks.toml").unwrap_err();
    assert_eq!(position(&err), (Some(3), Some(1)), "{err}");

    let yaml = "tasks:\n  - name: a\n    enable: true\n";
    let err = ConfigDocument::parse(yaml, ConfigFormat::Yaml, "tasks.yaml").unwrap_err();
    assert_eq!(position(&err).0, Some(3), "{err}");
    // The position is shown once, in our words.
    assert!(!err.to_string().contains("column 5,"), "{err}");

    // Plain syntax errors too.
    let err = ConfigDocument::parse("{\"tasks\": [\n,]}", ConfigFormat::Json, "t").unwrap_err();
    assert_eq!(position(&err).0, Some(2), "{err}");
    let err = ConfigDocument::parse("tasks = [\n\n  {,\n]", ConfigFormat::Toml, "t").unwrap_err();
    assert_eq!(position(&err).0, Some(3), "{err}");
    let err = ConfigDocument::parse("tasks:\n  - [a\n  b: c", ConfigFormat::Yaml, "t").unwrap_err();
    assert!(position(&err).0.is_some(), "{err}");
}

#[test]
fn wrong_types_are_refused() {
    let err = ConfigDocument::parse(r#"{"version":"7","tasks":[]}"#, ConfigFormat::Json, "t")
        .unwrap_err();
    assert!(err.to_string().contains("invalid type"), "{err}");
    let err = ConfigDocument::parse(
        "tasks:\n  - name: a\n    enabled: yes please\n    cron: x\n",
        ConfigFormat::Yaml,
        "t",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("enabled") || err.to_string().contains("bool"),
        "{err}"
    );
}

#[test]
fn format_detection() {
    assert_eq!(
        ConfigFormat::from_path("a/b/tasks.json"),
        Some(ConfigFormat::Json)
    );
    assert_eq!(
        ConfigFormat::from_path("tasks.toml"),
        Some(ConfigFormat::Toml)
    );
    assert_eq!(
        ConfigFormat::from_path("tasks.yaml"),
        Some(ConfigFormat::Yaml)
    );
    assert_eq!(
        ConfigFormat::from_path("tasks.yml"),
        Some(ConfigFormat::Yaml)
    );
    assert_eq!(ConfigFormat::from_path("tasks"), None);

    assert_eq!(
        ConfigFormat::from_content_type("application/toml"),
        Some(ConfigFormat::Toml)
    );
    assert_eq!(
        ConfigFormat::from_content_type("text/yaml; charset=utf-8"),
        Some(ConfigFormat::Yaml)
    );
    assert_eq!(
        ConfigFormat::from_content_type("application/yaml"),
        Some(ConfigFormat::Yaml)
    );
    assert_eq!(
        ConfigFormat::from_content_type("application/octet-stream"),
        None
    );

    assert_eq!("YML".parse::<ConfigFormat>().unwrap(), ConfigFormat::Yaml);
    assert!("ini".parse::<ConfigFormat>().is_err());

    // An explicit format beats sniffing.
    let raw = RawConfig::new("tasks: []").with_format(ConfigFormat::Json);
    assert!(raw.parse("t").is_err());
    assert_eq!(
        RawConfig::new("tasks: []").effective_format(),
        ConfigFormat::Yaml
    );
}

#[test]
fn a_leading_byte_order_mark_is_ignored() {
    for (text, format) in [
        (JSON, ConfigFormat::Json),
        (TOML, ConfigFormat::Toml),
        (YAML, ConfigFormat::Yaml),
    ] {
        let with_bom = format!("\u{feff}{text}");
        assert_eq!(
            ConfigDocument::parse(&with_bom, format, "t").unwrap(),
            expected()
        );
        assert_eq!(RawConfig::new(with_bom).parse("t").unwrap(), expected());
    }
}
