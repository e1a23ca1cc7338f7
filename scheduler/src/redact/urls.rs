//! URLs: a connection or webhook URL's password and secret query values hidden, whether it
//! stands alone, was parsed, or is embedded in text.

use std::ops::Range;

use super::{MASK, is_secret_key, push_masked, redact_url};

/// A parsed `url` for people: any userinfo replaced by `***` and secret-looking query values hidden, then through
/// [`redact_url`] for what the parser did not see as user info (an unencoded `/` in
/// a password makes `http://u:12/34@h/` parse as host `u`, port 12).
pub(crate) fn redact_parsed_url(url: &url::Url) -> String {
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
                let v = if is_secret_key(&k) {
                    "***".to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        shown.query_pairs_mut().clear().extend_pairs(pairs);
    }
    redact_url(&shown.to_string().replace("%2A%2A%2A", "***"))
}

/// Redacts a string that may or may not parse as a URL. One that does not parse is never shown
/// as written: by the text rules of [`redact_url`] (secret query values and passwords
/// hidden), and not at all when it holds user info (a token may stand in the user name).
pub(crate) fn redact_location(location: &str) -> String {
    match url::Url::parse(location) {
        Ok(url) => redact_parsed_url(&url),
        Err(_) if location.contains('@') => "<unparseable URL with credentials>".to_owned(),
        Err(_) => redact_url(location),
    }
}

/// `url` redacted, where `url[..authority]` is `scheme://` (with any leading whitespace).
pub(super) fn redact_url_form(url: &str, authority: usize) -> String {
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..authority]);
    let mut rest = &url[authority..];
    if let Some(password) = password_span(rest) {
        out.push_str(&rest[..password.start]);
        out.push_str(MASK);
        rest = &rest[password.end..];
    }
    // With the password gone, the first `?` or `#` is the real end of the path.
    match rest.find(['?', '#']) {
        Some(q) if rest.as_bytes()[q] == b'?' => {
            out.push_str(&rest[..=q]);
            redact_query(&rest[q + 1..], &mut out);
        }
        _ => out.push_str(rest),
    }
    out
}

/// The password of the `user:password@host...` that follows `scheme://`: from after the first
/// `:` (when it comes before any `/`, `?` or `#`) to the last `@`. A password cannot extend
/// beyond the last `@`, so this never ends too early; an `@` in the path or query makes it end
/// too late, which hides more than needed. `None` for an empty password.
fn password_span(after_scheme: &str) -> Option<Range<usize>> {
    let colon = after_scheme
        .find([':', '/', '?', '#'])
        .filter(|&i| after_scheme.as_bytes()[i] == b':')?;
    let at = colon + after_scheme[colon..].rfind('@')?;
    (at > colon + 1).then_some(colon + 1..at)
}

/// Appends `query` (after the `?`) with secret values replaced.
fn redact_query(query: &str, out: &mut String) {
    let mut rest = query;
    loop {
        let end = rest.find(['&', '#']).unwrap_or(rest.len());
        let pair = &rest[..end];
        if let Some((key, value)) = pair.split_once('=')
            && is_secret_key(key)
        {
            out.push_str(key);
            out.push('=');
            let value_start = key.len() + 1;
            // The value may hold unencoded `&` or `#`: it runs to the next `&name=`.
            match next_parameter(&rest[value_start..]) {
                Some(amp) => {
                    push_masked(out, &rest[value_start..value_start + amp]);
                    out.push('&');
                    rest = &rest[value_start + amp + 1..];
                    continue;
                }
                None => {
                    if !value.is_empty() || end < rest.len() {
                        out.push_str(MASK);
                    }
                    return;
                }
            }
        }
        out.push_str(pair);
        match rest.as_bytes().get(end) {
            Some(b'&') => {
                out.push('&');
                rest = &rest[end + 1..];
            }
            // The fragment: shown as is.
            Some(_) => {
                out.push_str(&rest[end..]);
                return;
            }
            None => return,
        }
    }
}

/// Where in a query value the next parameter starts: the first `&` followed by `name=`.
fn next_parameter(value: &str) -> Option<usize> {
    value.match_indices('&').map(|(i, _)| i).find(|&i| {
        let after = &value[i + 1..];
        after
            .find(['=', '&', '#'])
            .is_some_and(|n| n > 0 && after.as_bytes()[n] == b'=')
    })
}

/// How far the URL at the start of `text` (whose `scheme://` is `scheme` bytes) extends: to the
/// first whitespace; but while its user info is still open (`scheme://user:`, no `@` yet) the
/// password is taken to contain whitespace, and the URL runs on to the last `@` of the line and
/// the host after it.
pub(super) fn url_extent(text: &str, scheme: usize) -> usize {
    let token_end = text[scheme..]
        .find(char::is_whitespace)
        .map_or(text.len(), |i| scheme + i);
    let token = &text[scheme..token_end];
    let open = token
        .find([':', '/', '?', '#', '@'])
        .is_some_and(|i| token.as_bytes()[i] == b':' && !token[i..].contains('@'));
    if !open {
        return token_end;
    }
    let line_end = text[token_end..]
        .find('\n')
        .map_or(text.len(), |i| token_end + i);
    match text[token_end..line_end].rfind('@') {
        Some(at) => {
            let at = token_end + at;
            text[at..]
                .find(char::is_whitespace)
                .map_or(text.len(), |i| at + i)
        }
        None => token_end,
    }
}
