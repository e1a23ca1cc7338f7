//! [`HttpSource`]: a config document served over HTTP(S), polled with conditional requests.
//!
//! Owns the request (headers, token, timeout, `If-None-Match` / `If-Modified-Since`) and the
//! mapping of responses to [`Fetched`]. URLs are redacted before they reach a log or an error.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{
    AUTHORIZATION, CONTENT_TYPE, ETAG, HeaderMap, HeaderName, HeaderValue, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, LAST_MODIFIED,
};
use reqwest::{StatusCode, Url};

use super::{ConfigError, ConfigFormat, ConfigSource, Fetched, RawConfig};
use crate::error::error_chain;

/// Default time allowed for one request, connection to last body byte.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// A body larger than this is refused rather than buffered: a task list is a few kilobytes.
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// Redirects followed per request, all within the configured host.
const MAX_REDIRECTS: usize = 5;

/// Query parameters whose values are hidden in [`ConfigSource::describe`] (matched as substrings,
/// case-insensitive).
const SECRET_QUERY_HINTS: &[&str] = &[
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "auth",
    "sig",
    "credential",
];

/// A config document at an `http://` or `https://` URL.
///
/// Every fetch is a conditional GET: the `ETag` and `Last-Modified` of the last `200` are sent
/// back as `If-None-Match` / `If-Modified-Since`, and `304 Not Modified` means
/// [`Fetched::Unchanged`]. Any other non-2xx status is an error naming it. The format comes from
/// the response's `Content-Type`, else it is sniffed. Credentials in the URL (`user:pass@`) are
/// sent as basic auth and never shown. Redirects are followed only within the same host, so
/// headers and tokens never leave it.
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
                ConfigError::invalid_setting(
                    "header",
                    format!("`{name}` is not a valid HTTP header name"),
                )
            })
            .and_then(|name| {
                let mut value = HeaderValue::from_str(value).map_err(|_| {
                    ConfigError::invalid_setting(
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
            ConfigError::invalid_setting(
                "url",
                format!("`{}` is not a URL: {e}", redact(&self.url)),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ConfigError::invalid_setting(
                "url",
                format!("`{}` is not an http:// or https:// URL", redact_url(&url)),
            ));
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::invalid_setting(
                "timeout",
                "the HTTP timeout must be greater than zero",
            ));
        }
        let client = reqwest::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(self.timeout)
            .redirect(same_host_redirects())
            .build()
            .map_err(|e| {
                ConfigError::invalid_setting("http client", error_chain(&e.without_url()))
            })?;
        Ok(HttpSource {
            client,
            description: redact_url(&url),
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
            ConfigError::Timeout {
                source_name: self.describe(),
                timeout: self.timeout,
            }
        } else {
            // Without its URL the chain names none, as far as reqwest goes; redacting anyway
            // keeps a URL nested in a cause (a proxy's, a redirect's) from slipping through.
            ConfigError::fetch(
                self.describe(),
                crate::redact::redact_text(&error_chain(&error.without_url())),
            )
        }
    }
}

/// Follows redirects only within the configured host: extra headers (an API key) would otherwise
/// be sent to wherever a redirect points. reqwest drops `Authorization` across hosts, but not
/// custom headers.
fn same_host_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let origin = attempt.previous().first().and_then(Url::host_str);
        let target = attempt.url().host_str();
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else if target != origin {
            let message = format!(
                "redirect to another host ({}) refused; configure the final URL instead",
                target.unwrap_or("none")
            );
            attempt.error(message)
        } else {
            attempt.follow()
        }
    })
}

/// `url` with any userinfo replaced by `***` and secret-looking query values hidden, then through
/// [`crate::redact::redact_url`] for what the parser did not see as user info (an unencoded `/` in
/// a password makes `http://u:12/34@h/` parse as host `u`, port 12).
pub(super) fn redact_url(url: &Url) -> String {
    let mut shown = url.clone();
    if !url.username().is_empty() || url.password().is_some() {
        // Both parts may be secrets (`https://<token>@host/`), so neither is shown.
        let _ = shown.set_password(None);
        let _ = shown.set_username("***");
    }
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let lower = k.to_ascii_lowercase();
                let secret = SECRET_QUERY_HINTS.iter().any(|hint| lower.contains(hint));
                let v = if secret {
                    "***".to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        shown.query_pairs_mut().clear().extend_pairs(pairs);
    }
    crate::redact::redact_url(&shown.to_string().replace("%2A%2A%2A", "***"))
}

/// Redacts a string that may or may not parse as a URL.
pub(super) fn redact(location: &str) -> String {
    match Url::parse(location) {
        Ok(url) => redact_url(&url),
        Err(_) if location.contains('@') => "<unparseable URL with credentials>".to_owned(),
        Err(_) => location.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_userinfo_and_secret_query_values() {
        let url = Url::parse("https://u:p@h.example/x?env=prod&access_token=abc&apiKey=k").unwrap();
        assert_eq!(
            redact_url(&url),
            "https://***@h.example/x?env=prod&access_token=***&apiKey=***"
        );
        let source = HttpSource::builder("https://u:pw@h.example/x")
            .bearer_token("tok")
            .build()
            .unwrap();
        let debug = format!("{source:?}");
        assert!(!debug.contains("pw") && !debug.contains("tok"), "{debug}");
        let builder = HttpSource::builder("https://u:pw@h.example/x");
        assert!(!format!("{builder:?}").contains("pw"));
        let url = Url::parse("https://tok@h.example/").unwrap();
        assert_eq!(redact_url(&url), "https://***@h.example/");
        let url = Url::parse("http://h.example:8080/tasks.json").unwrap();
        assert_eq!(redact_url(&url), "http://h.example:8080/tasks.json");
    }

    #[test]
    fn a_password_the_parser_misreads_is_still_hidden() {
        // An unencoded `/` makes the parser see host `u`, port 12 and a path holding the rest.
        let url = Url::parse("http://u:12/34@h.example/x").unwrap();
        assert_eq!(redact_url(&url), "http://u:***@h.example/x");
        assert_eq!(
            redact("http://u:pa/ss@h.example/x"),
            "<unparseable URL with credentials>"
        );
    }

    #[test]
    fn invalid_header_is_reported_by_build() {
        let err = HttpSource::builder("http://127.0.0.1/x")
            .header("bad header", "v")
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("bad header"), "{err}");
        let err = HttpSource::builder("ftp://h/x").build().unwrap_err();
        assert!(err.to_string().contains("http://"), "{err}");
    }
}
