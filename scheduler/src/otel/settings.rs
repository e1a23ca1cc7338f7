//! The `OTEL_*` variables a node reads ([`OtelSettings`]): endpoints, protocol, headers,
//! timeouts, compression, the service's name and resource attributes, the export interval,
//! `OTEL_SDK_DISABLED`; each invalid value refused naming its variable, no header value ever
//! shown.

use std::time::Duration;

use crate::env::Env;
use crate::vars;
use crate::{Error, Result};

/// How often metrics are exported unless `OTEL_METRIC_EXPORT_INTERVAL` says otherwise (the
/// specification's default).
pub const DEFAULT_METRIC_EXPORT_INTERVAL: Duration = Duration::from_secs(60);
/// How long one export may take unless `OTEL_EXPORTER_OTLP_TIMEOUT` says otherwise (the
/// specification's default).
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The `service.name` of a node whose environment names none.
pub const DEFAULT_SERVICE_NAME: &str = "scheduler";

/// An invalid value of `name`, as the crate's error.
pub(super) fn invalid(name: &'static str, message: impl Into<String>) -> Error {
    crate::env::invalid(name, message).into()
}

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

#[cfg(test)]
mod tests;
