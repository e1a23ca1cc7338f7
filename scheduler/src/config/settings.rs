//! Where the config lives and how often to poll it: the environment contract and
//! [`source_from_location`].
//!
//! This file only turns strings into sources and durations; it starts nothing.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use url::Url;

#[cfg(feature = "http-config")]
use super::HttpSource;
use super::{ConfigError, ConfigSource, ConfigWatcher, DEFAULT_POLL_INTERVAL, FileSource};
use crate::bounds;
use crate::env::{Env, InvalidSetting, invalid};
use crate::redact::redact_location as redact;

/// Default time allowed for one HTTP request, connection to last body byte.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(10);

// The names live with every other variable's, in `crate::vars`.
pub use crate::vars::{
    CONFIG as ENV_CONFIG, CONFIG_HEADERS as ENV_CONFIG_HEADERS,
    CONFIG_POLL_INTERVAL as ENV_CONFIG_POLL_INTERVAL, CONFIG_TIMEOUT as ENV_CONFIG_TIMEOUT,
    CONFIG_TOKEN as ENV_CONFIG_TOKEN,
};

/// Where the config lives and how it is polled, usually read from the environment.
///
/// ```
/// use std::time::Duration;
/// use scheduler::config::ConfigSettings;
///
/// let env = [
///     ("SCHEDULER_CONFIG", "https://config.example.com/myapp/tasks.json"),
///     ("SCHEDULER_CONFIG_POLL_INTERVAL", "1s"),
///     ("SCHEDULER_CONFIG_TOKEN", "t0ken"),
/// ];
/// let lookup = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
/// let settings = ConfigSettings::from_lookup(lookup)?.expect("SCHEDULER_CONFIG is set");
/// assert_eq!(settings.poll_interval, Duration::from_secs(1));
/// let source = settings.source()?;
/// assert_eq!(source.describe(), "https://config.example.com/myapp/tasks.json");
/// assert!(!format!("{settings:?}").contains("t0ken"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigSettings {
    /// Path or URL, as accepted by [`source_from_location`].
    pub location: String,
    /// How often to poll. Default [`DEFAULT_POLL_INTERVAL`].
    pub poll_interval: Duration,
    /// HTTP request timeout. Default [`DEFAULT_HTTP_TIMEOUT`].
    pub http_timeout: Duration,
    /// Extra HTTP headers.
    pub headers: Vec<(String, String)>,
    /// HTTP bearer token.
    pub token: Option<String>,
}

impl fmt::Debug for ConfigSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigSettings")
            .field("location", &redact(&self.location))
            .field("poll_interval", &self.poll_interval)
            .field("http_timeout", &self.http_timeout)
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

impl ConfigSettings {
    /// Settings for `location` with every default.
    pub fn new(location: impl Into<String>) -> Self {
        Self {
            location: location.into(),
            poll_interval: DEFAULT_POLL_INTERVAL,
            http_timeout: DEFAULT_HTTP_TIMEOUT,
            headers: Vec::new(),
            token: None,
        }
    }

    // `from_env` and `from_lookup`, which return the crate's `Error` (which wraps this module's
    // errors, so it is not named here), are in `builder.rs` beside the node's environment
    // contract.

    /// Reads the `SCHEDULER_CONFIG*` variables through `env`; `Ok(None)` when `SCHEDULER_CONFIG`
    /// is unset or empty.
    pub(crate) fn from_reader(env: &Env<'_>) -> Result<Option<Self>, InvalidSetting> {
        let Some(location) = env.string(ENV_CONFIG) else {
            return Ok(None);
        };
        let mut settings = Self::new(location);
        if let Some(interval) =
            env.duration_in(ENV_CONFIG_POLL_INTERVAL, bounds::CONFIG_POLL_INTERVAL)?
        {
            settings.poll_interval = interval;
        }
        let is_http = is_http(&settings.location);
        let http_only = |name: &'static str| {
            invalid(
                name,
                format!("only applies to an http(s):// {ENV_CONFIG}, which is a file path here"),
            )
        };
        if let Some(timeout) = env.duration_in(ENV_CONFIG_TIMEOUT, bounds::CONFIG_HTTP_TIMEOUT)? {
            if !is_http {
                return Err(http_only(ENV_CONFIG_TIMEOUT));
            }
            settings.http_timeout = timeout;
        }
        if let Some(token) = env.string(ENV_CONFIG_TOKEN) {
            if !is_http {
                return Err(http_only(ENV_CONFIG_TOKEN));
            }
            settings.token = Some(token);
        }
        if let Some(headers) = env.string(ENV_CONFIG_HEADERS) {
            if !is_http {
                return Err(http_only(ENV_CONFIG_HEADERS));
            }
            settings.headers = parse_headers(&headers)?;
        }
        Ok(Some(settings))
    }

    /// Builds the source these settings describe.
    pub fn source(&self) -> Result<Box<dyn ConfigSource>, ConfigError> {
        if !is_http(&self.location) {
            if self.token.is_some() || !self.headers.is_empty() {
                return Err(ConfigError::invalid(
                    "location",
                    "headers and tokens only apply to an http(s):// location",
                ));
            }
            return source_from_location(&self.location);
        }
        http_source(self)
    }

    /// Builds the source and a [`ConfigWatcher`] polling it at `poll_interval`.
    pub fn watcher(&self) -> Result<ConfigWatcher, ConfigError> {
        Ok(ConfigWatcher::new(self.source()?).poll_interval(self.poll_interval))
    }
}

/// The HTTP source of `settings` (an `http(s)://` location).
#[cfg(feature = "http-config")]
fn http_source(settings: &ConfigSettings) -> Result<Box<dyn ConfigSource>, ConfigError> {
    let mut builder = HttpSource::builder(settings.location.trim()).timeout(settings.http_timeout);
    for (name, value) in &settings.headers {
        builder = builder.header(name, value);
    }
    if let Some(token) = &settings.token {
        builder = builder.bearer_token(token);
    }
    Ok(Box::new(builder.build()?))
}

/// A build without the `http-config` feature has no HTTP source: an `http(s)://` location is
/// refused, naming the feature.
#[cfg(not(feature = "http-config"))]
fn http_source(settings: &ConfigSettings) -> Result<Box<dyn ConfigSource>, ConfigError> {
    Err(ConfigError::invalid(
        "location",
        format!(
            "`{}` is an HTTP(S) URL, which needs the `http-config` feature of the scheduler \
             crate, and this build leaves it out (add it to the dependency's `features`)",
            redact(settings.location.trim())
        ),
    ))
}

/// A source for a path or URL: `http://` and `https://` give an [`HttpSource`] (default settings),
/// anything else a [`FileSource`] (a `file://` prefix is allowed). Other schemes are refused:
/// implement [`ConfigSource`] for them.
///
/// ```
/// use scheduler::config::source_from_location;
///
/// assert_eq!(source_from_location("file:///etc/myapp/tasks.toml")?.describe(), "/etc/myapp/tasks.toml");
/// assert_eq!(source_from_location("tasks.json")?.describe(), "tasks.json");
/// assert!(source_from_location("consul://kv/myapp").is_err());
/// # Ok::<(), scheduler::config::ConfigError>(())
/// ```
pub fn source_from_location(location: &str) -> Result<Box<dyn ConfigSource>, ConfigError> {
    let location = location.trim();
    if location.is_empty() {
        return Err(ConfigError::invalid(
            "location",
            "the config location is empty; give a file path or an http(s):// URL",
        ));
    }
    if is_http(location) {
        return http_source(&ConfigSettings::new(location));
    }
    if let Some(rest) = strip_prefix_ignore_case(location, "file://") {
        let path = if rest.starts_with('/') {
            Url::parse(location)
                .ok()
                .and_then(|url| url.to_file_path().ok())
                .ok_or_else(|| {
                    ConfigError::invalid(
                        "location",
                        format!("`{location}` is not a valid file:// URL"),
                    )
                })?
        } else {
            // `file://tasks.json`: not a proper URL, but the intent is clear.
            PathBuf::from(rest)
        };
        return Ok(Box::new(FileSource::new(path)));
    }
    if let Some((scheme, _)) = location.split_once("://")
        && !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return Err(ConfigError::invalid(
            "location",
            format!(
                "`{scheme}://` is not a built-in config source; use a file path, an http(s):// URL, \
                 or implement `ConfigSource`"
            ),
        ));
    }
    Ok(Box::new(FileSource::new(location)))
}

fn is_http(location: &str) -> bool {
    let location = location.trim();
    strip_prefix_ignore_case(location, "http://").is_some()
        || strip_prefix_ignore_case(location, "https://").is_some()
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn parse_headers(value: &str) -> Result<Vec<(String, String)>, InvalidSetting> {
    value
        .split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').ok_or_else(|| {
                invalid(
                    ENV_CONFIG_HEADERS,
                    "expected comma-separated `Name=value` pairs",
                )
            })?;
            let value = percent_encoding::percent_decode_str(value.trim())
                .decode_utf8()
                .map_err(|_| {
                    invalid(
                        ENV_CONFIG_HEADERS,
                        format!(
                            "the value of `{}` is not valid percent-encoded UTF-8",
                            name.trim()
                        ),
                    )
                })?;
            Ok((name.trim().to_owned(), value.into_owned()))
        })
        .collect()
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

    /// A build without `http-config` (CI's minimal-features step).
    #[cfg(not(feature = "http-config"))]
    #[test]
    fn an_http_location_names_the_feature() {
        let message = source_from_location("https://u:secret@h.example/t.json")
            .err()
            .expect("refused")
            .to_string();
        assert!(message.contains("`http-config` feature"), "{message}");
        assert!(!message.contains("secret"), "{message}");
    }

    #[test]
    fn unset_or_empty_location_means_no_config() {
        assert_eq!(ConfigSettings::from_lookup(lookup(&[])).unwrap(), None);
        assert_eq!(
            ConfigSettings::from_lookup(lookup(&[(ENV_CONFIG, "  ")])).unwrap(),
            None
        );
    }

    // Both read an http(s):// location.
    #[cfg(feature = "http-config")]
    #[test]
    fn defaults_and_overrides() {
        let s = ConfigSettings::from_lookup(lookup(&[(ENV_CONFIG, "tasks.json")]))
            .unwrap()
            .unwrap();
        assert_eq!(s.poll_interval, DEFAULT_POLL_INTERVAL);
        let s = ConfigSettings::from_lookup(lookup(&[
            (ENV_CONFIG, "https://h.example/t.json"),
            (ENV_CONFIG_POLL_INTERVAL, "1s"),
            (ENV_CONFIG_TIMEOUT, "300ms"),
            (ENV_CONFIG_HEADERS, "X-Env=prod, X-Key=a%2Cb"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(s.poll_interval, Duration::from_secs(1));
        assert_eq!(s.http_timeout, Duration::from_millis(300));
        assert_eq!(
            s.headers,
            vec![
                ("X-Env".to_owned(), "prod".to_owned()),
                ("X-Key".to_owned(), "a,b".to_owned())
            ]
        );
        s.source().unwrap();
    }

    #[test]
    fn bad_values_name_the_variable() {
        for env in [
            &[(ENV_CONFIG, "t.json"), (ENV_CONFIG_POLL_INTERVAL, "often")][..],
            &[(ENV_CONFIG, "t.json"), (ENV_CONFIG_POLL_INTERVAL, "0s")][..],
            &[(ENV_CONFIG, "t.json"), (ENV_CONFIG_POLL_INTERVAL, "10ms")][..],
            &[(ENV_CONFIG, "t.json"), (ENV_CONFIG_TOKEN, "x")][..],
            &[(ENV_CONFIG, "http://h/t"), (ENV_CONFIG_HEADERS, "novalue")][..],
        ] {
            let err = ConfigSettings::from_lookup(lookup(env)).unwrap_err();
            let name = env[1].0;
            assert!(err.to_string().contains(name), "{err}");
        }
    }

    #[cfg(feature = "http-config")]
    #[test]
    fn locations() {
        assert!(is_http("HTTPS://h/x"));
        assert_eq!(
            source_from_location("file://relative/tasks.yaml")
                .unwrap()
                .describe(),
            "relative/tasks.yaml"
        );
        assert!(source_from_location("").is_err());
        assert_eq!(
            source_from_location("http://u:p@h.example/t")
                .unwrap()
                .describe(),
            "http://***@h.example/t"
        );
    }
}
