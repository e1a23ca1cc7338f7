//! [`HttpSource`]: a config document served over HTTP(S), polled with conditional requests.
//!
//! Owns the request (headers, token, timeout, `If-None-Match` / `If-Modified-Since`) and the
//! mapping of responses to [`Fetched`], and where requests may go: redirects stay within the
//! configured origin, so credentials never reach another one. URLs are redacted before they reach
//! a log or an error.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{
    AUTHORIZATION, CONTENT_TYPE, ETAG, HeaderMap, HeaderName, HeaderValue, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, LAST_MODIFIED,
};
use reqwest::{StatusCode, Url};

use super::settings::ENV_CONFIG;
use super::{ConfigError, ConfigFormat, ConfigSource, Fetched, RawConfig};
use crate::causes::error_chain;

use super::settings::DEFAULT_HTTP_TIMEOUT;

/// A body larger than this is refused rather than buffered: a task list is a few kilobytes.
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// Redirects followed per request, all within the configured origin.
const MAX_REDIRECTS: usize = 5;

/// A config document at an `http://` or `https://` URL.
///
/// Every fetch is a conditional GET: the `ETag` and `Last-Modified` of the last `200` are sent
/// back as `If-None-Match` / `If-Modified-Since`, and `304 Not Modified` means
/// [`Fetched::Unchanged`]. Any other non-2xx status is an error naming it. The format comes from
/// the response's `Content-Type`, else it is sniffed. Credentials in the URL (`user:pass@`) are
/// sent as basic auth and never shown.
///
/// Redirects are followed (at most 5) only within the configured origin (scheme, host and port):
/// the token, the headers and URL credentials go with every request, so a redirect elsewhere is
/// an error naming its target, and the fix is to configure the final URL. A source that sends
/// credentials over plain `http://` to a host that is not loopback logs a warning when built.
///
/// ```
/// use std::time::Duration;
/// use scheduler::config::{ConfigSource, HttpSource};
///
/// let source = HttpSource::builder("https://deploy:s3cret@config.example.com/myapp/tasks.json")
///     .bearer_token("t0ken")
///     .header("X-Env", "prod")
///     .timeout(Duration::from_secs(5))
///     .build()?;
/// assert_eq!(source.describe(), "https://***@config.example.com/myapp/tasks.json");
/// # Ok::<(), scheduler::config::ConfigError>(())
/// ```
pub struct HttpSource {
    client: reqwest::Client,
    url: Url,
    description: String,
    headers: HeaderMap,
    timeout: Duration,
    format: Option<ConfigFormat>,
    etag: Option<HeaderValue>,
    last_modified: Option<HeaderValue>,
}

/// Builds an [`HttpSource`]; see [`HttpSource::builder`].
#[must_use = "call `build()` to get the source"]
pub struct HttpSourceBuilder {
    url: String,
    headers: HeaderMap,
    timeout: Duration,
    format: Option<ConfigFormat>,
    error: Option<ConfigError>,
}

// By hand: the URL may hold credentials, so only its redacted form is shown.
impl fmt::Debug for HttpSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSource")
            .field("url", &self.description)
            .field("headers", &self.headers)
            .field("timeout", &self.timeout)
            .field("format", &self.format)
            .field("etag", &self.etag)
            .field("last_modified", &self.last_modified)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for HttpSourceBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSourceBuilder")
            .field("url", &redact(&self.url))
            .field("headers", &self.headers)
            .field("timeout", &self.timeout)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl HttpSource {
    /// Starts building a source for `url`.
    pub fn builder(url: impl Into<String>) -> HttpSourceBuilder {
        HttpSourceBuilder {
            url: url.into(),
            headers: HeaderMap::new(),
            timeout: DEFAULT_HTTP_TIMEOUT,
            format: None,
            error: None,
        }
    }

    /// The URL, with credentials.
    pub fn url(&self) -> &Url {
        &self.url
    }
}

impl HttpSourceBuilder {
    /// Adds a header sent with every request. Invalid names or values are reported by
    /// [`build`](Self::build). Values are marked sensitive (hidden from `Debug` output).
    pub fn header(mut self, name: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        let (name, value) = (name.as_ref(), value.as_ref());
        let parsed = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| {
                ConfigError::invalid(
                    "header",
                    format!("`{name}` is not a valid HTTP header name"),
                )
            })
            .and_then(|name| {
                let mut value = HeaderValue::from_str(value).map_err(|_| {
                    ConfigError::invalid(
                        "header",
                        format!("the value of header `{name}` is not a valid HTTP header value"),
                    )
                })?;
                value.set_sensitive(true);
                Ok((name, value))
            });
        match parsed {
            Ok((name, value)) => {
                self.headers.append(name, value);
            }
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        self
    }

    /// Sends `Authorization: Bearer <token>` with every request. Default: no token.
    pub fn bearer_token(self, token: impl AsRef<str>) -> Self {
        let value = format!("Bearer {}", token.as_ref());
        self.header(AUTHORIZATION.as_str(), value)
    }

    /// Time allowed for one request, from connecting to the last body byte. Default: 10 s
    /// ([`DEFAULT_HTTP_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Uses `format` whatever the `Content-Type` says. Default: by content type, else sniffed.
    pub fn format(mut self, format: ConfigFormat) -> Self {
        self.format = Some(format);
        self
    }

    /// Validates the URL, headers and timeout and builds the HTTP client.
    pub fn build(self) -> Result<HttpSource, ConfigError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let url = Url::parse(&self.url).map_err(|e| {
            ConfigError::invalid("url", format!("`{}` is not a URL: {e}", redact(&self.url)))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ConfigError::invalid(
                "url",
                format!("`{}` is not an http:// or https:// URL", redact_url(&url)),
            ));
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::invalid(
                "timeout",
                "the HTTP timeout must be greater than zero",
            ));
        }
        let description = redact_url(&url);
        let has_credentials =
            !self.headers.is_empty() || !url.username().is_empty() || url.password().is_some();
        if credentials_travel_in_clear(&url, has_credentials) {
            tracing::warn!(
                source = %description,
                "the config token, headers or URL credentials travel unencrypted: the URL is \
                 http:// and the host is not loopback; use https://"
            );
        }
        let client = reqwest::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(self.timeout)
            .redirect(same_origin_redirects(url.clone()))
            .build()
            .map_err(|e| ConfigError::invalid("http client", error_chain(&e.without_url())))?;
        Ok(HttpSource {
            client,
            description,
            url,
            headers: self.headers,
            timeout: self.timeout,
            format: self.format,
            etag: None,
            last_modified: None,
        })
    }
}

#[async_trait]
impl ConfigSource for HttpSource {
    fn describe(&self) -> String {
        self.description.clone()
    }

    async fn fetch(&mut self) -> Result<Fetched, ConfigError> {
        let mut request = self
            .client
            .get(self.url.clone())
            .headers(self.headers.clone());
        if let Some(etag) = &self.etag {
            request = request.header(IF_NONE_MATCH, etag.clone());
        }
        if let Some(last_modified) = &self.last_modified {
            request = request.header(IF_MODIFIED_SINCE, last_modified.clone());
        }
        let mut response = request.send().await.map_err(|e| self.request_error(e))?;
        let status = response.status();
        if status == StatusCode::NOT_MODIFIED {
            return Ok(Fetched::Unchanged);
        }
        if !status.is_success() {
            return Err(ConfigError::HttpStatus {
                source_name: self.describe(),
                status: status.as_u16(),
            });
        }
        let headers = response.headers();
        let etag = headers.get(ETAG).cloned();
        let last_modified = headers.get(LAST_MODIFIED).cloned();
        let format = self.format.or_else(|| {
            headers
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(ConfigFormat::from_content_type)
        });

        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.request_error(e))? {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(ConfigError::fetch(
                    self.describe(),
                    format!("response body larger than {MAX_BODY_BYTES} bytes"),
                ));
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8(body).map_err(|e| {
            ConfigError::fetch(
                self.describe(),
                format!("response body is not valid UTF-8: {}", e.utf8_error()),
            )
        })?;

        // Validators are kept only after the whole body arrived, so a cut-off response is
        // fetched again in full next time.
        let revision = etag
            .as_ref()
            .or(last_modified.as_ref())
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.etag = etag;
        self.last_modified = last_modified;
        let mut raw = RawConfig::new(text);
        raw.format = format;
        raw.revision = revision;
        Ok(Fetched::Changed(raw))
    }
}

impl HttpSource {
    fn request_error(&self, error: reqwest::Error) -> ConfigError {
        if error.is_timeout() {
            return ConfigError::Timeout {
                source_name: self.describe(),
                timeout: self.timeout,
            };
        }
        let error = error.without_url();
        // A refused redirect says all there is to say; reqwest's "error following redirect"
        // around it adds nothing.
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(e) = cause {
            if let Some(refusal) = e.downcast_ref::<RedirectRefusal>() {
                return ConfigError::fetch(self.describe(), refusal);
            }
            cause = e.source();
        }
        // Without its URL the chain names none, as far as reqwest goes; redacting anyway keeps
        // a URL nested in a cause (a proxy's, a redirect's) from slipping through.
        ConfigError::fetch(
            self.describe(),
            crate::redact::redact_text(&error_chain(&error)),
        )
    }
}

/// Follows redirects only within the origin of `configured`: the token, custom headers and URL
/// credentials are sent with every request, and reqwest only drops `Authorization` when the
/// origin changes, not custom headers (an API key).
fn same_origin_redirects(configured: Url) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        // `previous` holds every URL requested so far, the configured one first.
        match check_redirect(&configured, attempt.url(), attempt.previous().len()) {
            Ok(()) => attempt.follow(),
            Err(refusal) => attempt.error(refusal),
        }
    })
}

/// Whether a redirect to `target`, after `requests` requests to `configured`'s origin, may be
/// followed. Origins compare scheme, host and port (a default port equals its explicit form).
fn check_redirect(configured: &Url, target: &Url, requests: usize) -> Result<(), RedirectRefusal> {
    if target.origin() != configured.origin() {
        Err(RedirectRefusal::OtherOrigin {
            target: redact_url(target),
            origin: configured.origin().ascii_serialization(),
        })
    } else if requests > MAX_REDIRECTS {
        Err(RedirectRefusal::TooMany)
    } else {
        Ok(())
    }
}

/// Why a redirect was not followed; the message of the fetch error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum RedirectRefusal {
    #[error(
        "the server redirected to {target}, which is not {origin} (another scheme, host or \
         port); not followed, because the token, headers and URL credentials are never sent to \
         another origin: point {ENV_CONFIG} at the final URL"
    )]
    OtherOrigin {
        /// The redacted target.
        target: String,
        /// The configured origin, `scheme://host:port`.
        origin: String,
    },
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooMany,
}

/// Whether credentials (`has_credentials`: a token, headers or URL user info) sent to `url` would
/// cross the network unencrypted: plain `http://` to a host that is not loopback.
fn credentials_travel_in_clear(url: &Url, has_credentials: bool) -> bool {
    // The parser has normalised the host: IPv4 in dotted decimal, IPv6 in brackets.
    let host = url.host_str().unwrap_or_default();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
        || host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .and_then(|h| h.parse::<Ipv6Addr>().ok())
            .is_some_and(|ip| {
                ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            });
    has_credentials && url.scheme() == "http" && !loopback
}

/// `url` as it may be shown (see [`crate::redact::redact_parsed_url`]).
pub(super) fn redact_url(url: &Url) -> String {
    crate::redact::redact_parsed_url(url)
}

/// A location that may or may not parse as a URL, as it may be shown (see
/// [`crate::redact::redact_location`]).
pub(super) fn redact(location: &str) -> String {
    crate::redact::redact_location(location)
}

#[cfg(test)]
mod tests;
