//! What one delivery attempt came to.

/// What one delivery attempt came to.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The HTTP status (or SMTP reply code), if the other end answered.
    pub status: Option<u16>,
    /// What went wrong, if anything (never a URL or a secret).
    pub error: Option<String>,
    /// Whether the channel took it.
    pub delivered: bool,
    /// The endpoint is gone (410): send nothing more to it.
    pub gone: bool,
    /// Retrying cannot help (a refused address, no recipient, a message the vendor refuses
    /// for good): the delivery is given up, the channel stays on.
    pub permanent: bool,
    /// The earliest the endpoint wants to be tried again (a 429's `Retry-After`).
    pub retry_after: Option<std::time::Duration>,
}

impl Outcome {
    pub(crate) fn failed(error: impl Into<String>) -> Self {
        Self {
            status: None,
            error: Some(error.into()),
            delivered: false,
            gone: false,
            permanent: false,
            retry_after: None,
        }
    }
}
