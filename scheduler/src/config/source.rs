//! [`ConfigSource`]: the one trait every config location implements (file, HTTP, a company's
//! config centre).
//!
//! A source only fetches text and says whether it changed; parsing, deduplication and the
//! last-good-document rule belong to the [`ConfigWatcher`](super::ConfigWatcher).

use async_trait::async_trait;

use super::{ConfigDocument, ConfigError, ConfigFormat};

/// Where the config document comes from.
///
/// Implement this to plug in a config centre (Consul, etcd, Apollo, Nacos, an in-house service):
/// `fetch` returns the current text, or [`Fetched::Unchanged`] when the source can tell cheaply
/// that nothing changed since its previous successful fetch (an ETag, a revision index). A source
/// that cannot tell may return [`Fetched::Changed`] every time; the watcher still suppresses
/// documents equal to the last good one.
///
/// ```
/// use scheduler::config::{ConfigError, ConfigFormat, ConfigSource, Fetched, RawConfig};
///
/// /// A fixed document, e.g. for tests.
/// struct Inline(&'static str);
///
/// #[async_trait::async_trait]
/// impl ConfigSource for Inline {
///     fn describe(&self) -> String {
///         "inline config".to_owned()
///     }
///
///     async fn fetch(&mut self) -> Result<Fetched, ConfigError> {
///         Ok(Fetched::Changed(RawConfig::new(self.0).with_format(ConfigFormat::Json)))
///     }
/// }
/// ```
#[async_trait]
pub trait ConfigSource: Send + Sync {
    /// A human-readable name for logs and errors: a path, or a URL with credentials redacted.
    ///
    /// Must never contain secrets (passwords, tokens, signed query parameters).
    fn describe(&self) -> String;

    /// Fetches the current document text, or reports that it has not changed since the previous
    /// successful fetch.
    async fn fetch(&mut self) -> Result<Fetched, ConfigError>;
}

#[async_trait]
impl<S: ConfigSource + ?Sized> ConfigSource for Box<S> {
    fn describe(&self) -> String {
        (**self).describe()
    }

    async fn fetch(&mut self) -> Result<Fetched, ConfigError> {
        (**self).fetch().await
    }
}

/// What one [`ConfigSource::fetch`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// Nothing changed since the previous successful fetch.
    Unchanged,
    /// The text is new (or the source cannot tell).
    Changed(RawConfig),
}

/// Document text as fetched, before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawConfig {
    /// The document text.
    pub text: String,
    /// The format, when the source knows it (file extension, content type); sniffed otherwise.
    pub format: Option<ConfigFormat>,
    /// The source's own revision marker (an ETag, a content hash, a config centre's index), for
    /// logs only.
    pub revision: Option<String>,
}

impl RawConfig {
    /// Text of unknown format and revision.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            format: None,
            revision: None,
        }
    }

    /// Sets the format instead of sniffing it.
    pub fn with_format(mut self, format: ConfigFormat) -> Self {
        self.format = Some(format);
        self
    }

    /// Sets the revision marker shown in logs.
    pub fn with_revision(mut self, revision: impl Into<String>) -> Self {
        self.revision = Some(revision.into());
        self
    }

    /// The format: the known one, or sniffed from the text.
    pub fn effective_format(&self) -> ConfigFormat {
        self.format
            .unwrap_or_else(|| ConfigFormat::sniff(&self.text))
    }

    /// Parses the text; `source_name` goes into errors.
    pub fn parse(&self, source_name: &str) -> Result<ConfigDocument, ConfigError> {
        ConfigDocument::parse(&self.text, self.effective_format(), source_name)
    }
}
