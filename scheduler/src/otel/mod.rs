//! OpenTelemetry (the `otel` feature): a node's runs as spans and its metrics, exported over
//! OTLP (gRPC or HTTP/protobuf) to a collector, configured by the standard `OTEL_*` variables.
//!
//! [`OtelSettings`] reads and validates the variables (an invalid value is an
//! [`Error::InvalidSetting`] naming it, never a panic); [`SchedulerBuilder::from_env`] reads them
//! and [`SchedulerBuilder::otel`] sets them in code. Nothing is exported unless an endpoint is
//! set. While a node runs ([`Scheduler::run_until`]) it exports, on pipelines of its own (no
//! global provider is set, so several nodes in one process stay apart):
//!
//! - **a span per run**, named `run <task>`, from the run's start to its end, with the
//!   attributes `scheduler.task`, `scheduler.run_id`, `scheduler.scheduled_at` (the tick, RFC
//!   3339), `scheduler.attempt`, `scheduler.trigger`, `scheduler.node`, `scheduler.owners`
//!   (the task's owners, a string array) and `scheduler.label.<key>` for each of its labels
//!   (see [`TaskTags`](crate::events::TaskTags)), and at its end
//!   `scheduler.outcome` (`succeeded`, `failed`, `timed_out`, `interrupted`, `cancelled`: the
//!   `outcome` of `scheduler_task_runs_total`) and `scheduler.event` (the [event](crate::events)
//!   that ended it). A failed, timed-out or abandoned run has the status `Error` with its
//!   (redacted) error, a succeeded run `Ok`. The spans are made from the node's own events,
//!   handed over synchronously (not through a subscriber's buffer, which may drop them);
//! - **the node's metrics**, the very numbers `/metrics` serves ([`crate::metrics`]): each
//!   counter and gauge is read from the node's registry when the exporter collects (named as its
//!   family there, `scheduler_task_runs` for `scheduler_task_runs_total`: a Prometheus backend
//!   adds the `_total`), with the same labels as attributes. A histogram cannot be read back
//!   from that registry, so its observations are recorded in an OpenTelemetry histogram as
//!   well, with the same bucket bounds.
//!
//! At the end of [`Scheduler::run_until`], once every run's outcome is recorded, the spans
//! still buffered and the metrics' last values are flushed (waiting at most [`FLUSH_TIMEOUT`]).
//!
//! **Secrets.** `OTEL_EXPORTER_OTLP_HEADERS` often holds an API key: no header value is ever
//! logged or shown (`Debug` lists the header names), and an error about one names its header,
//! never its value. Endpoints are logged with any password or secret query value redacted.
//!
//! This module owns the OTLP pipelines and the mapping of runs and metrics onto them; it decides
//! nothing about runs and measures nothing of its own.
//!
//! [`SchedulerBuilder::from_env`]: crate::SchedulerBuilder::from_env
//! [`SchedulerBuilder::otel`]: crate::SchedulerBuilder::otel
//! [`Scheduler::run_until`]: crate::Scheduler::run_until
//!
//! Its parts: [`settings`] (the `OTEL_*` variables), `spans` (runs as spans), `metrics` (the
//! registry's numbers as OpenTelemetry instruments); this file installs and shuts down a node's
//! pipelines.

mod metrics;
pub mod settings;
mod spans;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{KeyValue, metrics::MeterProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::events::EventSink;
use crate::metrics::Metrics;
use crate::{Error, Result};

use metrics::observe_registry;
use settings::invalid;
pub use settings::{
    DEFAULT_EXPORT_TIMEOUT, DEFAULT_METRIC_EXPORT_INTERVAL, DEFAULT_SERVICE_NAME, OtelSettings,
    OtlpProtocol, OtlpTarget,
};
use spans::RunSpans;

/// How long the end of a node waits for its last spans and metrics to be exported.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The instrumentation scope of the spans and metrics.
const SCOPE: &str = "scheduler";

/// A node's OTLP pipelines, from [`Exporters::install`] to [`Exporters::shutdown`].
pub(crate) struct Exporters {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    spans: Option<Arc<RunSpans>>,
}

impl Exporters {
    /// Builds the exporters of `settings` for the node `node_id` and starts their pipelines.
    /// Must run inside a Tokio runtime (the gRPC client's connection lives on it).
    pub(crate) fn install(
        settings: &OtelSettings,
        node_id: &str,
        metrics: &Arc<Metrics>,
    ) -> Result<Self> {
        let resource = resource(settings, node_id);
        let mut exporters = Self {
            tracer: None,
            meter: None,
            spans: None,
        };
        if let Some(target) = &settings.traces {
            let exporter = span_exporter(target)?;
            let provider = SdkTracerProvider::builder()
                .with_resource(resource.clone())
                .with_batch_exporter(exporter)
                .build();
            exporters.spans = Some(Arc::new(RunSpans::new(provider.tracer(SCOPE))));
            exporters.tracer = Some(provider);
            tracing::info!(
                endpoint = %crate::redact::redact_url(&target.endpoint),
                protocol = target.protocol.as_str(),
                "exporting run spans over OTLP"
            );
        }
        if let Some(target) = &settings.metrics {
            let exporter = metric_exporter(target)?;
            let reader = PeriodicReader::builder(exporter)
                .with_interval(settings.metric_export_interval)
                .build();
            let provider = SdkMeterProvider::builder()
                .with_resource(resource)
                .with_reader(reader)
                .build();
            observe_registry(&provider.meter(SCOPE), metrics);
            exporters.meter = Some(provider);
            tracing::info!(
                endpoint = %crate::redact::redact_url(&target.endpoint),
                protocol = target.protocol.as_str(),
                interval = ?settings.metric_export_interval,
                "exporting metrics over OTLP"
            );
        }
        Ok(exporters)
    }

    /// What turns the node's run events into spans, if spans are exported.
    pub(crate) fn span_sink(&self) -> Option<Arc<dyn EventSink>> {
        self.spans
            .as_ref()
            .map(|s| Arc::clone(s) as Arc<dyn EventSink>)
    }

    /// Exports what is still buffered (spans, the metrics' last values) and stops the
    /// pipelines, waiting at most [`FLUSH_TIMEOUT`] for each.
    pub(crate) async fn shutdown(self) {
        let Self {
            tracer,
            meter,
            spans,
        } = self;
        if let Some(spans) = spans {
            // Runs still open when the node stops (none after a graceful drain) are ended here.
            spans.end_all();
        }
        // The SDK's shutdown blocks until its worker thread has exported.
        let done = tokio::task::spawn_blocking(move || {
            if let Some(tracer) = tracer
                && let Err(e) = tracer.shutdown_with_timeout(FLUSH_TIMEOUT)
            {
                tracing::warn!(error = %e, "could not flush the run spans");
            }
            if let Some(meter) = meter
                && let Err(e) = meter.shutdown_with_timeout(FLUSH_TIMEOUT)
            {
                tracing::warn!(error = %e, "could not flush the metrics");
            }
        });
        let _ = done.await;
    }
}

fn resource(settings: &OtelSettings, node_id: &str) -> Resource {
    let mut attributes: Vec<KeyValue> = settings
        .resource_attributes
        .iter()
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
        .collect();
    if !settings
        .resource_attributes
        .iter()
        .any(|(k, _)| k == "service.instance.id")
    {
        attributes.push(KeyValue::new("service.instance.id", node_id.to_owned()));
    }
    Resource::builder_empty()
        .with_detector(Box::new(
            opentelemetry_sdk::resource::TelemetryResourceDetector,
        ))
        .with_attributes(attributes)
        .with_service_name(
            settings
                .service_name
                .clone()
                .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned()),
        )
        .build()
}

fn build_error(what: &str, e: opentelemetry_otlp::ExporterBuildError) -> Error {
    // The exporter's message names settings, never header values (it is given none to show).
    invalid(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("cannot build the OTLP {what} exporter: {e}"),
    )
}

fn span_exporter(target: &OtlpTarget) -> Result<opentelemetry_otlp::SpanExporter> {
    let builder = opentelemetry_otlp::SpanExporter::builder();
    match target.protocol {
        OtlpProtocol::Grpc => grpc(builder.with_tonic(), target)?.build(),
        OtlpProtocol::HttpProtobuf => http(builder.with_http(), target).build(),
    }
    .map_err(|e| build_error("span", e))
}

fn metric_exporter(target: &OtlpTarget) -> Result<opentelemetry_otlp::MetricExporter> {
    let builder = opentelemetry_otlp::MetricExporter::builder();
    match target.protocol {
        OtlpProtocol::Grpc => grpc(builder.with_tonic(), target)?.build(),
        OtlpProtocol::HttpProtobuf => http(builder.with_http(), target).build(),
    }
    .map_err(|e| build_error("metric", e))
}

/// A gRPC exporter's settings: endpoint, timeout, metadata, TLS (the platform's roots) for
/// `https://`, gzip.
fn grpc<B>(builder: B, target: &OtlpTarget) -> Result<B>
where
    B: opentelemetry_otlp::WithExportConfig + opentelemetry_otlp::WithTonicConfig,
{
    use opentelemetry_otlp::tonic_types::metadata::MetadataMap;
    let mut headers = http::HeaderMap::new();
    for (name, value) in &target.headers {
        // Checked when parsed; an error here still names only the header.
        let name =
            http::HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes()).map_err(|_| {
                invalid(
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    format!("`{name}` is not a header name"),
                )
            })?;
        let value = http::HeaderValue::from_str(value).map_err(|_| {
            invalid(
                "OTEL_EXPORTER_OTLP_HEADERS",
                format!("the value of `{name}` is not a valid header value"),
            )
        })?;
        headers.append(name, value);
    }
    let mut builder = builder
        .with_endpoint(target.endpoint.clone())
        .with_timeout(target.timeout)
        .with_metadata(MetadataMap::from_headers(headers));
    if target.endpoint.to_ascii_lowercase().starts_with("https://") {
        builder = builder.with_tls_config(
            opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().with_enabled_roots(),
        );
    }
    if target.gzip {
        builder = builder.with_compression(opentelemetry_otlp::Compression::Gzip);
    }
    Ok(builder)
}

/// An HTTP/protobuf exporter's settings: endpoint (used as given), timeout, headers, gzip.
fn http<B>(builder: B, target: &OtlpTarget) -> B
where
    B: opentelemetry_otlp::WithExportConfig + opentelemetry_otlp::WithHttpConfig,
{
    let mut builder = builder
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(target.endpoint.clone())
        .with_timeout(target.timeout)
        .with_headers(target.headers.iter().cloned().collect());
    if target.gzip {
        builder = builder.with_compression(opentelemetry_otlp::Compression::Gzip);
    }
    builder
}
