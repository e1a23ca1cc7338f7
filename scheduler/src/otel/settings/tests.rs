use super::*;

fn lookup<'a>(env: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        env.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

fn settings(env: &[(&str, &str)]) -> Result<Option<OtelSettings>> {
    OtelSettings::from_lookup(lookup(env))
}

fn error(env: &[(&str, &str)]) -> String {
    settings(env).expect_err("refused").to_string()
}

#[test]
fn nothing_is_exported_without_an_endpoint_or_when_disabled() {
    assert!(settings(&[]).unwrap().is_none());
    assert!(settings(&[("OTEL_SERVICE_NAME", "x")]).unwrap().is_none());
    let disabled = [
        ("OTEL_SDK_DISABLED", "true"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
    ];
    assert!(settings(&disabled).unwrap().is_none());
    let none = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        ("OTEL_TRACES_EXPORTER", "none"),
        ("OTEL_METRICS_EXPORTER", "none"),
    ];
    assert!(settings(&none).unwrap().is_none());
}

#[test]
fn signal_variables_win_over_the_general_ones() {
    let s = settings(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317/"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf"),
        (
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "https://m.example/otlp/metrics",
        ),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "1000"),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.name=jobs,deployment.environment=prod%2Ceu",
        ),
    ])
    .unwrap()
    .unwrap();
    let traces = s.traces.unwrap();
    assert_eq!(traces.endpoint, "http://c:4317/");
    assert_eq!(traces.protocol, OtlpProtocol::Grpc);
    assert_eq!(traces.timeout, Duration::from_millis(2500));
    assert!(traces.gzip);
    let metrics = s.metrics.unwrap();
    assert_eq!(metrics.endpoint, "https://m.example/otlp/metrics");
    assert_eq!(metrics.protocol, OtlpProtocol::HttpProtobuf);
    assert!(!metrics.gzip);
    assert_eq!(s.metric_export_interval, Duration::from_secs(1));
    assert_eq!(s.service_name.as_deref(), Some("jobs"));
    assert_eq!(
        s.resource_attributes,
        [("deployment.environment".to_owned(), "prod,eu".to_owned())]
    );
}

#[test]
fn every_bad_value_is_refused_naming_its_variable() {
    let base = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
    for (env, name, says) in [
        (
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4318")],
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "not a url")],
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "not a URL",
        ),
        (
            vec![base, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")],
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "`grpc` or `http/protobuf`",
        ),
        (
            vec![base, ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")],
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            "milliseconds",
        ),
        (
            vec![base, ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd")],
            "OTEL_EXPORTER_OTLP_COMPRESSION",
            "`gzip` or `none`",
        ),
        (
            vec![base, ("OTEL_METRIC_EXPORT_INTERVAL", "0")],
            "OTEL_METRIC_EXPORT_INTERVAL",
            "more than zero",
        ),
        (
            vec![base, ("OTEL_SDK_DISABLED", "perhaps")],
            "OTEL_SDK_DISABLED",
            "`true` or `false`",
        ),
        (
            vec![base, ("OTEL_TRACES_EXPORTER", "jaeger")],
            "OTEL_TRACES_EXPORTER",
            "`otlp` or `none`",
        ),
        (
            vec![base, ("OTEL_RESOURCE_ATTRIBUTES", "a=1,b")],
            "OTEL_RESOURCE_ATTRIBUTES",
            "entry 2 has no `=`",
        ),
        (
            vec![base, ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/ca.pem")],
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
            "not supported",
        ),
    ] {
        let message = error(&env);
        assert!(
            message.starts_with(&format!("invalid setting `{name}`")) && message.contains(says),
            "{message}"
        );
    }
}

#[test]
fn a_header_value_is_never_shown() {
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:pw@c:4318"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret%0A"),
    ];
    let message = error(&env);
    assert!(
        message.contains("`x-api-key`") && !message.contains("s3cret"),
        "{message}"
    );
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:pw@c:4318"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "bad header=s3cret"),
    ];
    assert!(!error(&env).contains("s3cret"));
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:pw@c:4318"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret,x-team=ops"),
    ];
    let s = settings(&env).unwrap().unwrap();
    let shown = format!("{s:?}");
    assert!(
        shown.contains("x-api-key") && shown.contains("x-team"),
        "{shown}"
    );
    assert!(
        !shown.contains("s3cret") && !shown.contains(":pw@"),
        "{shown}"
    );
}
