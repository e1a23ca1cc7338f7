//! An error and its causes written as one line, the form in which handler errors are stored and
//! HTTP, driver and child-process errors are reported. Names nothing else in the crate.

/// An error and its causes on one line, `error: cause: cause` (like anyhow's `{:#}`), skipping a
/// cause whose text the message already contains. Handler errors are stored this way, and
/// HTTP errors (whose own message is often just "error sending request") are reported so.
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}
