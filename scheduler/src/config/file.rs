//! [`FileSource`]: a local config file, polled.
//!
//! The file is re-opened by path on every fetch and symlinks are followed, so atomic replacement
//! (write a temp file, rename over) and Kubernetes ConfigMap updates (the `..data` symlink swapped
//! to a new timestamped directory) are both seen. Changes are detected by content hash, never by
//! modification time, which a rename or a symlink swap may not move.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::{ConfigError, ConfigFormat, ConfigSource, Fetched, RawConfig};

/// A local config file, re-read by path on every fetch.
///
/// The format comes from the extension (`.json`, `.toml`, `.yaml`/`.yml`), else it is sniffed.
/// Writers should replace the file atomically (write a temp file, rename it over); a read that
/// races an in-place rewrite is retried when the size on disk differs from what was read, but an
/// in-place rewrite cannot be caught in every case.
///
/// ```no_run
/// use scheduler::config::{ConfigSource, FileSource, Fetched};
///
/// # async fn demo() -> Result<(), scheduler::config::ConfigError> {
/// let mut source = FileSource::new("/etc/myapp/tasks.yaml");
/// if let Fetched::Changed(raw) = source.fetch().await? {
///     let doc = raw.parse(&source.describe())?;
///     println!("{} task entries", doc.tasks.len());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct FileSource {
    path: PathBuf,
    format: Option<ConfigFormat>,
    last_hash: Option<[u8; 32]>,
}

impl FileSource {
    /// A source reading `path`. Nothing is read until the first fetch.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let format = ConfigFormat::from_path(&path);
        Self {
            path,
            format,
            last_hash: None,
        }
    }

    /// Uses `format` whatever the extension says. Default: by extension, else sniffed.
    pub fn format(mut self, format: ConfigFormat) -> Self {
        self.format = Some(format);
        self
    }

    /// The path being read.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[async_trait]
impl ConfigSource for FileSource {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    async fn fetch(&mut self) -> Result<Fetched, ConfigError> {
        let io = |source| ConfigError::Io {
            source_name: self.describe(),
            source,
        };
        // Never more than the limit plus one byte (a path to /dev/zero reads forever).
        let limit = crate::bounds::CONFIG_DOCUMENT_BYTES.max;
        let mut bytes = Vec::new();
        tokio::fs::File::open(&self.path)
            .await
            .map_err(io)?
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(io)?;
        if bytes.len() as u64 > limit {
            return Err(ConfigError::fetch(
                self.describe(),
                super::prescan::too_large(),
            ));
        }
        // A writer that rewrites in place (no temp file + rename) can be caught mid-write, and a
        // cut-off YAML list may still parse, minus its last tasks. When the size on disk no longer
        // matches what was read, skip this poll and read again next time.
        if let Ok(meta) = tokio::fs::metadata(&self.path).await
            && meta.len() != bytes.len() as u64
        {
            tracing::debug!(path = %self.path.display(), "config file changed while being read; retrying next poll");
            return Ok(Fetched::Unchanged);
        }
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        if self.last_hash == Some(hash) {
            return Ok(Fetched::Unchanged);
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            ConfigError::fetch(
                self.describe(),
                format!("not valid UTF-8: {}", e.utf8_error()),
            )
        })?;
        // Remember the hash only once the text is usable, so a file that was not UTF-8 keeps
        // failing (and stays visible) until it is fixed.
        self.last_hash = Some(hash);
        let mut raw = RawConfig::new(text).with_revision(format!("sha256:{}", short_hex(&hash)));
        raw.format = self.format;
        Ok(Fetched::Changed(raw))
    }
}

fn short_hex(hash: &[u8; 32]) -> String {
    hash[..8].iter().map(|b| format!("{b:02x}")).collect()
}
