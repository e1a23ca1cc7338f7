//! OpenTelemetry export (the `otel` feature) against a real OTLP receiver on 127.0.0.1 that
//! decodes what arrives: a tonic gRPC server built from `opentelemetry-proto`'s service
//! definitions, and an HTTP server decoding the protobuf bodies with prost. A real node (an SQLite
//! file; PostgreSQL in `on_postgres`) runs a task that succeeds and one that fails, configured by
//! the standard `OTEL_*` variables (read through a lookup: tests share one process environment).
//!
//! Judged by what the receiver decoded: one span per run carrying the task, the run id, the tick,
//! the attempt, the node and the outcome as the run history records them, the status, the
//! resource and the API key header; and metrics whose every counter, gauge and histogram sample
//! equals what the node's `/metrics` serves. The spans must have arrived by the time the node's
//! graceful shutdown returns (the flush).

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point;
use opentelemetry_proto::tonic::trace::v1::{Span, status};
use prost::Message;
use scheduler::otel::OtelSettings;
use scheduler::testing::store::RunStatus;
use scheduler::{TaskContext, task};

use common::*;

const API_KEY: &str = "s3cret-api-key";

#[task(name = "otel.grpc.ok")]
async fn grpc_ok(_ctx: TaskContext) {}

#[task(name = "otel.grpc.fails")]
async fn grpc_fails(_ctx: TaskContext) -> std::io::Result<()> {
    Err(std::io::Error::other("the report API answered 503"))
}

#[task(name = "otel.http.ok")]
async fn http_ok(_ctx: TaskContext) {}

#[task(name = "otel.http.fails")]
async fn http_fails(_ctx: TaskContext) -> std::io::Result<()> {
    Err(std::io::Error::other("the report API answered 503"))
}

#[task(name = "otel.pg.ok")]
async fn pg_ok(_ctx: TaskContext) {}

#[task(name = "otel.pg.fails")]
async fn pg_fails(_ctx: TaskContext) -> std::io::Result<()> {
    Err(std::io::Error::other("the report API answered 503"))
}

/// What the receiver decoded, in arrival order, with the API key header each request carried.
#[derive(Default)]
struct Received {
    spans: Mutex<Vec<(Vec<KeyValue>, Span)>>,
    metrics: Mutex<Vec<ExportMetricsServiceRequest>>,
    api_keys: Mutex<Vec<Option<String>>>,
}

impl Received {
    fn traces(&self, request: ExportTraceServiceRequest, api_key: Option<String>) {
        self.api_keys.lock().unwrap().push(api_key);
        let mut spans = self.spans.lock().unwrap();
        for resource in request.resource_spans {
            let attributes = resource.resource.map(|r| r.attributes).unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    spans.push((attributes.clone(), span));
                }
            }
        }
    }

    fn metrics(&self, request: ExportMetricsServiceRequest, api_key: Option<String>) {
        self.api_keys.lock().unwrap().push(api_key);
        self.metrics.lock().unwrap().push(request);
    }
}

/// The gRPC receiver's services.
#[derive(Clone)]
struct Grpc(Arc<Received>);

fn api_key<T>(request: &tonic::Request<T>) -> Option<String> {
    request
        .metadata()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let key = api_key(&request);
        self.0.traces(request.into_inner(), key);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let key = api_key(&request);
        self.0.metrics(request.into_inner(), key);
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

/// Starts a gRPC OTLP receiver on 127.0.0.1; its address.
async fn grpc_receiver(received: Arc<Received>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = Grpc(received);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(service.clone()))
            .add_service(MetricsServiceServer::new(service))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    addr
}

/// Starts an HTTP/protobuf OTLP receiver on 127.0.0.1 (`/v1/traces`, `/v1/metrics`); its address.
async fn http_receiver(received: Arc<Received>) -> SocketAddr {
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode, header};

    fn key(headers: &HeaderMap) -> Option<String> {
        headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
    fn protobuf(body: Vec<u8>) -> ([(header::HeaderName, &'static str); 1], Vec<u8>) {
        ([(header::CONTENT_TYPE, "application/x-protobuf")], body)
    }
    async fn traces(
        State(r): State<Arc<Received>>,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<impl axum::response::IntoResponse, StatusCode> {
        assert_eq!(headers[header::CONTENT_TYPE], "application/x-protobuf");
        let request =
            ExportTraceServiceRequest::decode(body).map_err(|_| StatusCode::BAD_REQUEST)?;
        r.traces(request, key(&headers));
        Ok(protobuf(
            ExportTraceServiceResponse::default().encode_to_vec(),
        ))
    }
    async fn metrics(
        State(r): State<Arc<Received>>,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<impl axum::response::IntoResponse, StatusCode> {
        assert_eq!(headers[header::CONTENT_TYPE], "application/x-protobuf");
        let request =
            ExportMetricsServiceRequest::decode(body).map_err(|_| StatusCode::BAD_REQUEST)?;
        r.metrics(request, key(&headers));
        Ok(protobuf(
            ExportMetricsServiceResponse::default().encode_to_vec(),
        ))
    }
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(traces))
        .route("/v1/metrics", axum::routing::post(metrics))
        .with_state(received);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn text(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn attributes(attributes: &[KeyValue]) -> BTreeMap<String, String> {
    attributes
        .iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

/// A sample's key as the text exposition writes it: its name and its sorted labels.
type SampleKey = (String, Vec<(String, String)>);

/// Every sample of an OpenMetrics text exposition (the test's own reading of `/metrics`).
fn served_samples(text: &str) -> BTreeMap<SampleKey, f64> {
    let mut samples = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let mut labels: Vec<(String, String)> = rest
                    .trim_end_matches('}')
                    .split(',')
                    .map(|pair| {
                        let (k, v) = pair.split_once('=').unwrap();
                        (k.to_owned(), v.trim_matches('"').to_owned())
                    })
                    .collect();
                labels.sort();
                (name.to_owned(), labels)
            }
            None => (series.to_owned(), Vec::new()),
        };
        samples.insert((name, labels), value.parse::<f64>().unwrap());
    }
    samples
}

/// The samples an OTLP metrics export stands for, written as the text exposition would: a
/// monotonic sum `x` as `x_total`, a gauge as itself, a histogram as its cumulative `_bucket`s,
/// `_sum` and `_count`.
fn exported_samples(request: &ExportMetricsServiceRequest) -> BTreeMap<SampleKey, f64> {
    fn labels(attributes: &[KeyValue], extra: Option<(&str, String)>) -> Vec<(String, String)> {
        let mut labels: Vec<(String, String)> = attributes
            .iter()
            .map(|kv| (kv.key.clone(), text(&kv.value)))
            .chain(extra.map(|(k, v)| (k.to_owned(), v)))
            .collect();
        labels.sort();
        labels
    }
    fn number(value: &Option<number_data_point::Value>) -> f64 {
        match value {
            Some(number_data_point::Value::AsInt(i)) => *i as f64,
            Some(number_data_point::Value::AsDouble(d)) => *d,
            None => f64::NAN,
        }
    }
    let mut samples = BTreeMap::new();
    let metrics = request
        .resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics);
    for metric in metrics {
        let name = &metric.name;
        match metric.data.as_ref().expect("a metric has data") {
            Data::Sum(sum) => {
                assert!(sum.is_monotonic, "{name} is a counter");
                for p in &sum.data_points {
                    samples.insert(
                        (format!("{name}_total"), labels(&p.attributes, None)),
                        number(&p.value),
                    );
                }
            }
            Data::Gauge(gauge) => {
                for p in &gauge.data_points {
                    samples.insert(
                        (name.clone(), labels(&p.attributes, None)),
                        number(&p.value),
                    );
                }
            }
            Data::Histogram(histogram) => {
                for p in &histogram.data_points {
                    let mut cumulative = 0;
                    let bounds = p.explicit_bounds.iter().map(|b| b.to_string());
                    for (le, count) in bounds.chain(["+Inf".to_owned()]).zip(&p.bucket_counts) {
                        cumulative += count;
                        samples.insert(
                            (
                                format!("{name}_bucket"),
                                labels(&p.attributes, Some(("le", le))),
                            ),
                            cumulative as f64,
                        );
                    }
                    let plain = labels(&p.attributes, None);
                    samples.insert((format!("{name}_sum"), plain.clone()), p.sum.unwrap());
                    samples.insert((format!("{name}_count"), plain), p.count as f64);
                }
            }
            other => panic!("{name}: unexpected data {other:?}"),
        }
    }
    samples
}

/// A node on `db` exporting to `endpoint` over `protocol`, as the `OTEL_*` variables say, runs
/// `<prefix>ok` and `<prefix>fails` once each; judged by what `received` decoded.
async fn exports_spans_and_metrics(
    db: &TestDb,
    prefix: &str,
    protocol: &str,
    endpoint: String,
    received: &Received,
) {
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
        ("OTEL_EXPORTER_OTLP_HEADERS", format!("x-api-key={API_KEY}")),
        ("OTEL_SERVICE_NAME", "billing-jobs".to_owned()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=test".to_owned(),
        ),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200".to_owned()),
    ];
    let settings = OtelSettings::from_lookup(|name| {
        env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
    })
    .unwrap()
    .expect("an endpoint is set");
    assert!(!format!("{settings:?}").contains(API_KEY));
    let ok = format!("{prefix}ok");
    let fails = format!("{prefix}fails");
    let scheduler = node(db, "otel-node", tasks(prefix))
        .config_document(doc(vec![
            entry(&ok, "0 0 1 1 *"),
            scheduler::config::TaskConfig {
                owners: vec!["ann@example.com".into()],
                labels: [("team".to_owned(), "billing".to_owned())].into(),
                ..entry(&fails, "0 0 1 1 *")
            },
        ]))
        .default_owners(["oncall@example.com"])
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .otel(Some(settings))
        .build()
        .unwrap();
    let metrics_url = format!("http://{}/metrics", scheduler.admin_addr().unwrap());
    let node = start(scheduler);
    trigger_all_now(db, 2).await;
    wait_until(Duration::from_secs(60), "both runs recorded", || async {
        let runs = db.runs(None).await;
        runs.len() == 2 && runs.iter().all(|r| r.finished_at.is_some())
    })
    .await;

    // Metrics: an export equal, sample for sample, to what /metrics serves at the time (the
    // node is idle now, so the two meet).
    let http = reqwest::Client::new();
    let mut last_difference = String::new();
    let mut matched = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        let served = served_samples(
            &http
                .get(&metrics_url)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap(),
        );
        let exported = received
            .metrics
            .lock()
            .unwrap()
            .last()
            .map(exported_samples);
        if let Some(exported) = exported {
            if exported == served {
                matched = true;
                // The export is not trivially equal: the runs are in it.
                let runs = |outcome: &str, task: &str| {
                    let labels = vec![
                        ("outcome".to_owned(), outcome.to_owned()),
                        ("task".to_owned(), task.to_owned()),
                        ("trigger".to_owned(), "schedule".to_owned()),
                    ];
                    exported[&("scheduler_task_runs_total".to_owned(), labels)]
                };
                assert_eq!(runs("succeeded", &ok), 1.0);
                assert_eq!(runs("failed", &fails), 1.0);
                let count = |task: &str| {
                    let labels = vec![("task".to_owned(), task.to_owned())];
                    exported[&(
                        "scheduler_task_run_duration_seconds_count".to_owned(),
                        labels,
                    )]
                };
                assert_eq!((count(&ok), count(&fails)), (1.0, 1.0));
                break;
            }
            let differing: Vec<_> = served
                .iter()
                .filter(|(k, v)| exported.get(*k) != Some(*v))
                .map(|(k, v)| format!("{k:?}: served {v}, exported {:?}", exported.get(k)))
                .chain(
                    exported
                        .keys()
                        .filter(|k| !served.contains_key(*k))
                        .map(|k| format!("{k:?}: exported only")),
                )
                .collect();
            last_difference = differing.join("\n");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        matched,
        "no metrics export equal to /metrics within 60 s; last difference:\n{last_difference}"
    );
    let resource = attributes(
        received.metrics.lock().unwrap()[0].resource_metrics[0]
            .resource
            .as_ref()
            .map(|r| r.attributes.as_slice())
            .unwrap(),
    );
    assert_eq!(resource["service.name"], "billing-jobs");
    assert_eq!(resource["service.instance.id"], "otel-node");
    assert_eq!(resource["deployment.environment"], "test");

    // Spans: there once the graceful shutdown returns (flushed), one per run.
    node.stop().await;
    let runs = db.runs(None).await;
    let spans = received.spans.lock().unwrap().clone();
    assert_eq!(spans.len(), 2, "one span per run: {spans:#?}");
    for run in &runs {
        let (resource, span) = spans
            .iter()
            .find(|(_, s)| {
                attributes(&s.attributes).get("scheduler.run_id") == Some(&run.id.to_string())
            })
            .unwrap_or_else(|| panic!("no span of run {}: {spans:#?}", run.id));
        let attrs = attributes(&span.attributes);
        assert_eq!(span.name, format!("run {}", run.task_name));
        assert_eq!(attrs["scheduler.task"], run.task_name);
        assert_eq!(
            attrs["scheduler.scheduled_at"],
            run.scheduled_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        );
        assert_eq!(attrs["scheduler.attempt"], run.attempt.to_string());
        assert_eq!(attrs["scheduler.trigger"], "schedule");
        assert_eq!(attrs["scheduler.node"], "otel-node");
        assert_eq!(attrs["scheduler.outcome"], run.status.as_str());
        // Who answers for the run: its entry's owners and labels, or the node's default owners.
        let (owner, team) = if run.task_name == ok {
            ("oncall@example.com", None)
        } else {
            ("ann@example.com", Some("billing"))
        };
        assert!(
            attrs["scheduler.owners"].contains(owner),
            "{}",
            attrs["scheduler.owners"]
        );
        assert_eq!(attrs.get("scheduler.label.team").map(String::as_str), team);
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
        let status = span.status.as_ref().expect("a span status");
        if run.task_name == ok {
            assert_eq!(run.status, RunStatus::Succeeded);
            assert_eq!(status.code, status::StatusCode::Ok as i32);
        } else {
            assert_eq!(run.status, RunStatus::Failed);
            assert_eq!(status.code, status::StatusCode::Error as i32);
            assert!(status.message.contains("503"), "{status:?}");
            assert_eq!(attrs["scheduler.event"], "run.failed");
        }
        let resource = attributes(resource);
        assert_eq!(resource["service.name"], "billing-jobs");
    }
    let keys = received.api_keys.lock().unwrap().clone();
    assert!(
        !keys.is_empty() && keys.iter().all(|k| k.as_deref() == Some(API_KEY)),
        "every request carries the header: {keys:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_exports_run_spans_and_the_metrics_of_metrics_endpoint() {
    let db = TestDb::sqlite("otel_grpc").await;
    let received = Arc::new(Received::default());
    let addr = grpc_receiver(Arc::clone(&received)).await;
    exports_spans_and_metrics(
        &db,
        "otel.grpc.",
        "grpc",
        format!("http://{addr}"),
        &received,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_protobuf_exports_run_spans_and_the_metrics_of_metrics_endpoint() {
    let db = TestDb::sqlite("otel_http").await;
    let received = Arc::new(Received::default());
    let addr = http_receiver(Arc::clone(&received)).await;
    exports_spans_and_metrics(
        &db,
        "otel.http.",
        "http/protobuf",
        format!("http://{addr}"),
        &received,
    )
    .await;
}

/// A bad `OTEL_*` value stops the node's start with an error naming it, not a panic.
#[test]
fn a_bad_otel_value_is_an_error_naming_the_variable() {
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret,broken"),
    ];
    let error = scheduler::SchedulerBuilder::from_lookup(|name| {
        env.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    })
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("invalid setting `OTEL_EXPORTER_OTLP_HEADERS`"),
        "{error}"
    );
    assert!(!error.contains("s3cret"), "{error}");
}

mod on_postgres {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn http_protobuf_exports_run_spans_and_metrics_on_postgres() {
        let db = TestDb::postgres("otel_pg").await;
        let received = Arc::new(Received::default());
        let addr = http_receiver(Arc::clone(&received)).await;
        exports_spans_and_metrics(
            &db,
            "otel.pg.",
            "http/protobuf",
            format!("http://{addr}"),
            &received,
        )
        .await;
    }
}
