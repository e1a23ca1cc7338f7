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
//!   3339), `scheduler.attempt`, `scheduler.trigger`, `scheduler.node`, and at its end
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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _, TracerProvider as _};
use opentelemetry::{KeyValue, metrics::MeterProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

use crate::env::Env;
use crate::events::{EventSink, RunRef, SchedulerEvent};
use crate::metrics::Metrics;
use crate::vars;
use crate::{Error, Result};
use prometheus_client::metrics::MetricType;

/// How long the end of a node waits for its last spans and metrics to be exported.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// How often metrics are exported unless `OTEL_METRIC_EXPORT_INTERVAL` says otherwise (the
/// specification's default).
pub const DEFAULT_METRIC_EXPORT_INTERVAL: Duration = Duration::from_secs(60);
/// How long one export may take unless `OTEL_EXPORTER_OTLP_TIMEOUT` says otherwise (the
/// specification's default).
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The `service.name` of a node whose environment names none.
pub const DEFAULT_SERVICE_NAME: &str = "scheduler";

/// An invalid value of `name`, as the crate's error.
fn invalid(name: &'static str, message: impl Into<String>) -> Error {
    crate::env::invalid(name, message).into()
}

/// The instrumentation scope of the spans and metrics.
const SCOPE: &str = "scheduler";

/// The OTLP transport of one signal (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtlpProtocol {
    /// `grpc`: OTLP over gRPC (usually port 4317), the endpoint used as given.
    Grpc,
    /// `http/protobuf`: OTLP over HTTP with protobuf bodies (usually port 4318); a base
    /// endpoint gets `/v1/traces` or `/v1/metrics` appended. The default.
    HttpProtobuf,
}

impl OtlpProtocol {
    fn parse(name: &'static str, value: &str) -> Result<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "grpc" => Ok(Self::Grpc),
            "http/protobuf" => Ok(Self::HttpProtobuf),
            "http/json" => Err(invalid(
                name,
                "`http/json` is not supported; write `grpc` or `http/protobuf`",
            )),
            _ => Err(invalid(
                name,
                format!("`{value}` is not an OTLP protocol; write `grpc` or `http/protobuf`"),
            )),
        }
    }

    /// The name the variables use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
            Self::HttpProtobuf => "http/protobuf",
        }
    }
}

/// Where and how one signal (spans or metrics) is exported.
#[derive(Clone)]
#[non_exhaustive]
pub struct OtlpTarget {
    /// The full URL the signal is sent to (for `http/protobuf`, with its `/v1/...` path).
    pub endpoint: String,
    /// The transport.
    pub protocol: OtlpProtocol,
    /// Extra request headers (gRPC metadata), such as a vendor's API key. Never logged.
    pub headers: Vec<(String, String)>,
    /// How long one export may take. Default [`DEFAULT_EXPORT_TIMEOUT`].
    pub timeout: Duration,
    /// Compress requests with gzip (`OTEL_EXPORTER_OTLP_COMPRESSION=gzip`). Default off.
    pub gzip: bool,
}

impl OtlpTarget {
    /// A target at `endpoint` (the full URL of the signal) over `protocol`, no headers, the
    /// default timeout, no compression.
    pub fn new(protocol: OtlpProtocol, endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            protocol,
            headers: Vec::new(),
            timeout: DEFAULT_EXPORT_TIMEOUT,
            gzip: false,
        }
    }
}

impl std::fmt::Debug for OtlpTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OtlpTarget")
            .field("endpoint", &crate::redact::redact_url(&self.endpoint))
            .field("protocol", &self.protocol)
            .field("headers", &header_names)
            .field("timeout", &self.timeout)
            .field("gzip", &self.gzip)
            .finish()
    }
}

/// What a node exports over OTLP, usually read from the standard `OTEL_*` variables
/// ([`from_env`](Self::from_env)).
///
/// ```
/// use scheduler::otel::{OtelSettings, OtlpProtocol};
///
/// let env = [
///     ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
///     ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret"),
///     ("OTEL_SERVICE_NAME", "billing-jobs"),
/// ];
/// let lookup = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
/// let settings = OtelSettings::from_lookup(lookup)?.expect("an endpoint is set");
/// let traces = settings.traces.as_ref().unwrap();
/// assert_eq!(traces.endpoint, "http://collector:4318/v1/traces");
/// assert_eq!(traces.protocol, OtlpProtocol::HttpProtobuf);
/// assert_eq!(settings.metrics.as_ref().unwrap().endpoint, "http://collector:4318/v1/metrics");
/// assert!(!format!("{settings:?}").contains("s3cret"));
///
/// let bad = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "udp")];
/// let lookup = |name: &str| bad.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
/// let error = OtelSettings::from_lookup(lookup).unwrap_err().to_string();
/// assert!(error.starts_with("invalid setting `OTEL_EXPORTER_OTLP_PROTOCOL`"), "{error}");
/// # Ok::<(), scheduler::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OtelSettings {
    /// Where run spans go; `None`: they are not exported.
    pub traces: Option<OtlpTarget>,
    /// Where the metrics go; `None`: they are not exported.
    pub metrics: Option<OtlpTarget>,
    /// The resource's `service.name`. Default [`DEFAULT_SERVICE_NAME`].
    pub service_name: Option<String>,
    /// Further resource attributes (`OTEL_RESOURCE_ATTRIBUTES`). The node's id is
    /// `service.instance.id` unless one is given here.
    pub resource_attributes: Vec<(String, String)>,
    /// How often metrics are exported. Default [`DEFAULT_METRIC_EXPORT_INTERVAL`].
    pub metric_export_interval: Duration,
}

impl OtelSettings {
    /// Both signals to one collector: `endpoint` is its base URL (`http://collector:4317` for
    /// gRPC, `http://collector:4318` for HTTP, which gets `/v1/traces` and `/v1/metrics`).
    ///
    /// ```
    /// use scheduler::otel::{OtelSettings, OtlpProtocol};
    ///
    /// let settings = OtelSettings::collector(OtlpProtocol::Grpc, "http://127.0.0.1:4317");
    /// assert_eq!(settings.metrics.unwrap().endpoint, "http://127.0.0.1:4317");
    /// ```
    pub fn collector(protocol: OtlpProtocol, endpoint: &str) -> Self {
        Self {
            traces: Some(OtlpTarget::new(
                protocol,
                signal_url(protocol, endpoint, "v1/traces"),
            )),
            metrics: Some(OtlpTarget::new(
                protocol,
                signal_url(protocol, endpoint, "v1/metrics"),
            )),
            service_name: None,
            resource_attributes: Vec::new(),
            metric_export_interval: DEFAULT_METRIC_EXPORT_INTERVAL,
        }
    }

    /// The settings of the process environment, `None` when nothing is to be exported:
    ///
    /// | variable | meaning | default |
    /// |---|---|---|
    /// | `OTEL_SDK_DISABLED` | `true`: export nothing | `false` |
    /// | `OTEL_EXPORTER_OTLP_ENDPOINT` | the collector's base URL (HTTP: `/v1/traces` and `/v1/metrics` are appended) | none: nothing is exported |
    /// | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `..._METRICS_ENDPOINT` | one signal's full URL, used as given | the base URL's |
    /// | `OTEL_EXPORTER_OTLP_PROTOCOL`, `..._TRACES_PROTOCOL`, `..._METRICS_PROTOCOL` | `grpc` or `http/protobuf` | `http/protobuf` |
    /// | `OTEL_EXPORTER_OTLP_HEADERS`, `..._TRACES_HEADERS`, `..._METRICS_HEADERS` | `name=value,...`, values percent-encoded; never logged | none |
    /// | `OTEL_EXPORTER_OTLP_TIMEOUT`, `..._TRACES_TIMEOUT`, `..._METRICS_TIMEOUT` | one export's limit, in milliseconds | `10000` |
    /// | `OTEL_EXPORTER_OTLP_COMPRESSION`, `..._TRACES_COMPRESSION`, `..._METRICS_COMPRESSION` | `gzip` or `none` | `none` |
    /// | `OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER` | `otlp`, or `none` to leave the signal out | `otlp` |
    /// | `OTEL_SERVICE_NAME` | the resource's `service.name` | `service.name` of `OTEL_RESOURCE_ATTRIBUTES`, else `scheduler` |
    /// | `OTEL_RESOURCE_ATTRIBUTES` | `key=value,...`, values percent-encoded | none |
    /// | `OTEL_METRIC_EXPORT_INTERVAL` | milliseconds between metric exports | `60000` |
    ///
    /// A signal-specific variable wins over the general one. A signal is exported when it has
    /// an endpoint (its own or the base URL) and its exporter is not `none`. The collector's
    /// certificate is checked against the platform's roots; `OTEL_EXPORTER_OTLP_CERTIFICATE`
    /// and the client certificate variables are refused (not supported), not ignored.
    pub fn from_env() -> Result<Option<Self>> {
        Self::from_lookup(crate::env::process)
    }

    /// Like [`from_env`](Self::from_env), reading variables through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        Self::from_reader(&Env::new(&lookup))
    }

    pub(crate) fn from_reader(env: &Env<'_>) -> Result<Option<Self>> {
        if env.boolean(vars::OTEL_SDK_DISABLED)?.unwrap_or(false) {
            return Ok(None);
        }
        for name in [
            vars::OTEL_EXPORTER_OTLP_CERTIFICATE,
            vars::OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE,
            vars::OTEL_EXPORTER_OTLP_CLIENT_KEY,
        ] {
            if env.string(name).is_some() {
                return Err(invalid(
                    name,
                    "is not supported: the collector's certificate is checked against the \
                     platform's roots; unset it",
                ));
            }
        }
        let traces = signal_from(env, &TRACES)?;
        let metrics = signal_from(env, &METRICS)?;
        let mut resource_attributes = match env.string(vars::OTEL_RESOURCE_ATTRIBUTES) {
            Some(value) => parse_pairs(vars::OTEL_RESOURCE_ATTRIBUTES, &value, false)?,
            None => Vec::new(),
        };
        let service_name = env.string(vars::OTEL_SERVICE_NAME).or_else(|| {
            let at = resource_attributes
                .iter()
                .position(|(k, _)| k == "service.name")?;
            Some(resource_attributes.remove(at).1)
        });
        let metric_export_interval = env
            .number::<u64>(vars::OTEL_METRIC_EXPORT_INTERVAL)?
            .map(|ms| positive_millis(vars::OTEL_METRIC_EXPORT_INTERVAL, ms))
            .transpose()?
            .unwrap_or(DEFAULT_METRIC_EXPORT_INTERVAL);
        if traces.is_none() && metrics.is_none() {
            return Ok(None);
        }
        Ok(Some(Self {
            traces,
            metrics,
            service_name,
            resource_attributes,
            metric_export_interval,
        }))
    }
}

/// The variables of one signal.
struct Signal {
    path: &'static str,
    exporter: &'static str,
    endpoint: &'static str,
    protocol: &'static str,
    headers: &'static str,
    timeout: &'static str,
    compression: &'static str,
}

const TRACES: Signal = Signal {
    path: "v1/traces",
    exporter: vars::OTEL_TRACES_EXPORTER,
    endpoint: vars::OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    protocol: vars::OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
    headers: vars::OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    timeout: vars::OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
    compression: vars::OTEL_EXPORTER_OTLP_TRACES_COMPRESSION,
};

const METRICS: Signal = Signal {
    path: "v1/metrics",
    exporter: vars::OTEL_METRICS_EXPORTER,
    endpoint: vars::OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
    protocol: vars::OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
    headers: vars::OTEL_EXPORTER_OTLP_METRICS_HEADERS,
    timeout: vars::OTEL_EXPORTER_OTLP_METRICS_TIMEOUT,
    compression: vars::OTEL_EXPORTER_OTLP_METRICS_COMPRESSION,
};

/// The value of the signal's own variable, else of the general one, with its name.
fn either(
    env: &Env<'_>,
    own: &'static str,
    general: &'static str,
) -> Option<(&'static str, String)> {
    env.string(own)
        .map(|v| (own, v))
        .or_else(|| env.string(general).map(|v| (general, v)))
}

fn signal_from(env: &Env<'_>, signal: &Signal) -> Result<Option<OtlpTarget>> {
    match env.string(signal.exporter) {
        None => {}
        Some(v) if v.eq_ignore_ascii_case("otlp") => {}
        Some(v) if v.eq_ignore_ascii_case("none") => return Ok(None),
        Some(v) => {
            return Err(invalid(
                signal.exporter,
                format!("`{v}` is not supported; write `otlp` or `none`"),
            ));
        }
    }
    let protocol = match either(env, signal.protocol, vars::OTEL_EXPORTER_OTLP_PROTOCOL) {
        Some((name, value)) => OtlpProtocol::parse(name, &value)?,
        None => OtlpProtocol::HttpProtobuf,
    };
    let endpoint = if let Some(url) = env.string(signal.endpoint) {
        check_endpoint(signal.endpoint, &url)?;
        url
    } else if let Some(base) = env.string(vars::OTEL_EXPORTER_OTLP_ENDPOINT) {
        check_endpoint(vars::OTEL_EXPORTER_OTLP_ENDPOINT, &base)?;
        signal_url(protocol, &base, signal.path)
    } else {
        return Ok(None);
    };
    let headers = match either(env, signal.headers, vars::OTEL_EXPORTER_OTLP_HEADERS) {
        Some((name, value)) => parse_pairs(name, &value, true)?,
        None => Vec::new(),
    };
    let timeout = match either(env, signal.timeout, vars::OTEL_EXPORTER_OTLP_TIMEOUT) {
        Some((name, value)) => {
            let ms = value.parse::<u64>().map_err(|_| {
                invalid(
                    name,
                    format!("`{value}` is not a whole number of milliseconds (e.g. `10000`)"),
                )
            })?;
            positive_millis(name, ms)?
        }
        None => DEFAULT_EXPORT_TIMEOUT,
    };
    let gzip = match either(
        env,
        signal.compression,
        vars::OTEL_EXPORTER_OTLP_COMPRESSION,
    ) {
        None => false,
        Some((_, v)) if v.eq_ignore_ascii_case("none") => false,
        Some((_, v)) if v.eq_ignore_ascii_case("gzip") => true,
        Some((name, v)) => {
            return Err(invalid(
                name,
                format!("`{v}` is not supported; write `gzip` or `none`"),
            ));
        }
    };
    Ok(Some(OtlpTarget {
        endpoint,
        protocol,
        headers,
        timeout,
        gzip,
    }))
}

fn positive_millis(name: &'static str, ms: u64) -> Result<Duration> {
    if ms == 0 {
        return Err(invalid(name, "must be more than zero milliseconds"));
    }
    Ok(Duration::from_millis(ms))
}

/// An endpoint must be an absolute `http://` or `https://` URL with a host.
fn check_endpoint(name: &'static str, value: &str) -> Result<()> {
    let shown = || crate::redact::redact_location(value);
    let url = url::Url::parse(value).map_err(|e| {
        invalid(
            name,
            format!(
                "`{}` is not a URL ({e}); write it like `http://collector:4318`",
                shown()
            ),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(invalid(
            name,
            format!(
                "`{}` is not an http:// or https:// URL with a host; write it like \
                 `http://collector:4318`",
                shown()
            ),
        ));
    }
    Ok(())
}

/// A signal's URL from the base endpoint: gRPC uses it as given, HTTP appends the signal's path.
fn signal_url(protocol: OtlpProtocol, base: &str, path: &str) -> String {
    match protocol {
        OtlpProtocol::Grpc => base.to_owned(),
        OtlpProtocol::HttpProtobuf => format!("{}/{path}", base.trim_end_matches('/')),
    }
}

/// `key=value,...` with percent-encoded values (the OTLP headers and resource attributes
/// format). For headers (`secret`), an error names the header but never shows its value.
fn parse_pairs(name: &'static str, value: &str, secret: bool) -> Result<Vec<(String, String)>> {
    let what = if secret { "header" } else { "attribute" };
    value
        .split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .enumerate()
        .map(|(i, pair)| {
            let Some((key, raw)) = pair.split_once('=') else {
                return Err(invalid(
                    name,
                    format!(
                        "entry {} has no `=`: write comma-separated `name=value` pairs",
                        i + 1
                    ),
                ));
            };
            let key = key.trim();
            if key.is_empty() {
                return Err(invalid(name, format!("entry {} has no {what} name", i + 1)));
            }
            let decoded = percent_encoding::percent_decode_str(raw.trim())
                .decode_utf8()
                .map_err(|_| {
                    invalid(
                        name,
                        format!("the value of `{key}` is not valid percent-encoded UTF-8"),
                    )
                })?
                .into_owned();
            if secret {
                if !key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.!#$%&'*+^`|~".contains(&b))
                {
                    return Err(invalid(name, format!("`{key}` is not a header name")));
                }
                if decoded.bytes().any(|b| b.is_ascii_control()) {
                    return Err(invalid(
                        name,
                        format!("the value of `{key}` holds a control character"),
                    ));
                }
            }
            Ok((key.to_owned(), decoded))
        })
        .collect()
}

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
            exporters.spans = Some(Arc::new(RunSpans {
                tracer: provider.tracer(SCOPE),
                open: Mutex::new(HashMap::new()),
            }));
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

/// Turns a node's run events into spans: a run's span starts at its `run.started` and ends
/// at the event that ends it.
struct RunSpans {
    tracer: SdkTracer,
    open: Mutex<HashMap<i64, opentelemetry_sdk::trace::Span>>,
}

impl std::fmt::Debug for RunSpans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSpans").finish_non_exhaustive()
    }
}

impl RunSpans {
    fn start(&self, run: &RunRef) -> opentelemetry_sdk::trace::Span {
        self.tracer
            .span_builder(format!("run {}", run.task))
            .with_kind(SpanKind::Internal)
            .with_start_time(SystemTime::now())
            .with_attributes([
                KeyValue::new("scheduler.task", run.task.clone()),
                KeyValue::new("scheduler.run_id", run.run_id),
                KeyValue::new(
                    "scheduler.scheduled_at",
                    run.scheduled_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                ),
                KeyValue::new("scheduler.attempt", i64::from(run.attempt)),
                KeyValue::new("scheduler.trigger", run.trigger.clone()),
                KeyValue::new("scheduler.node", run.node.clone()),
            ])
            .start(&self.tracer)
    }

    fn end(&self, run: &RunRef, kind: &'static str, outcome: &'static str, error: Option<&str>) {
        let open = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&run.run_id);
        // A run handed back or cancelled before its handler started has no start: its span is
        // its end.
        let mut span = open.unwrap_or_else(|| self.start(run));
        span.set_attribute(KeyValue::new("scheduler.outcome", outcome));
        span.set_attribute(KeyValue::new("scheduler.event", kind));
        match (outcome, error) {
            ("succeeded", _) => span.set_status(Status::Ok),
            (_, Some(error)) => span.set_status(Status::error(error.to_owned())),
            _ => {}
        }
        span.end();
    }

    fn end_all(&self) {
        let open: Vec<_> = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for (_, mut span) in open {
            span.set_attribute(KeyValue::new("scheduler.event", "node.stopped"));
            span.end();
        }
    }
}

impl EventSink for RunSpans {
    fn offer(&self, event: &SchedulerEvent) {
        use SchedulerEvent as E;
        match event {
            E::RunStarted { run } => {
                let span = self.start(run);
                self.open
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(run.run_id, span);
            }
            E::RunSucceeded { run, .. } => self.end(run, event.kind(), "succeeded", None),
            E::RunFailed { run, error, .. } => self.end(run, event.kind(), "failed", Some(error)),
            E::RunTimedOut { run, error, .. } => {
                self.end(run, event.kind(), "timed_out", Some(error))
            }
            // Handed over: its tick runs again, so not an error.
            E::RunInterrupted { run, .. } => self.end(run, event.kind(), "interrupted", None),
            // At most once, stopped before it finished: what it did is unknown.
            E::RunAbandoned { run, reason } => {
                self.end(run, event.kind(), "interrupted", Some(reason))
            }
            // An operator's decision, not a failure.
            E::RunCancelled { run, .. } => self.end(run, event.kind(), "cancelled", None),
            _ => {}
        }
    }
}

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
fn observe_registry(meter: &opentelemetry::metrics::Meter, metrics: &Arc<Metrics>) {
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
