//! Hiding secrets in connection strings, and in text that embeds them, before they reach a log
//! line, an error message or a `Debug` output.
//!
//! Owns the rules for every form the crate meets (every other module calls these, none keeps
//! rules of its own): URLs (`scheme://user:password@host/db?password=`), parsed URLs (user info
//! hidden whole, for a token may stand in the user name),
//! libpq keyword/value strings (`host=db password='s3 cret'`), and free text that embeds either
//! (an error message quoting a URL) or states a secret another way: `Bearer` credentials,
//! `key: value` labels (`Authorization: Basic ...`, YAML, Rust `Debug`), JSON fields named like
//! secrets (`{"password": "..."}`, escaped or not) and JSON Web Tokens. The output is for people to read, never to connect with:
//! when a string is ambiguous the rule is to hide too much rather than too little. This module
//! must not parse for connecting, and nothing here may log.

use std::ops::Range;

/// What a hidden value is replaced by.
const MASK: &str = "***";

/// A query parameter or keyword whose name contains one of these (ASCII case-insensitive, after
/// percent-decoding) has its value hidden: database passwords, and the API keys, tokens and
/// signatures of webhook and config URLs (`?api_key=`, `access_token=`, `sig=`, `X-Amz-Credential=`).
const SECRET_KEY_HINTS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "key",
    "auth",
    "signature",
    "credential",
    "cookie",
    "passphrase",
];

/// Names that are secret as a whole word only (as hints they would catch too much).
const SECRET_KEY_NAMES: &[&str] = &["sig", "pwd", "pass"];

/// Removes passwords from a database or HTTP connection string, for logs and error messages.
///
/// Accepts every form a connection string comes in:
///
/// - a URL: the password of `scheme://user:password@host` is replaced by `***` (the user name
///   stays). The password may hold unencoded `/`, `?`, `#`, `@` or `:`; it is taken to run from the
///   first `:` of the user info to the **last** `@` of the string, so an `@` later in the path or
///   query hides more than the password, never less;
/// - URL query parameters named `password`, `sslpassword`, or anything containing `password`,
///   `passwd`, `secret`, `token`, `key`, `auth`, `signature` or `credential`, or named `sig`,
///   `pwd` or `pass` (any case, percent-encoded or not): the value is replaced, up to the
///   next `&name=`;
/// - a libpq keyword/value string (`host=db user=app password='it''s s3cret'`): values of such
///   keywords, unquoted (with `\` escapes) or single-quoted (with `\'`, `\\` or `''` inside);
/// - anything else is treated as text and goes through `redact_text`.
///
/// ```
/// use scheduler::store::postgres::redact_url;
///
/// assert_eq!(
///     redact_url("postgres://app:s3cret@db.internal:5432/jobs"),
///     "postgres://app:***@db.internal:5432/jobs"
/// );
/// // Unencoded delimiters in the password: everything up to the last `@` is hidden.
/// assert_eq!(
///     redact_url("postgres://app:pa/ss?w#o@rd@db:5432/x"),
///     "postgres://app:***@db:5432/x"
/// );
/// assert_eq!(
///     redact_url("postgres://db/jobs?sslmode=require&Pass%77ord=x"),
///     "postgres://db/jobs?sslmode=require&Pass%77ord=***"
/// );
/// assert_eq!(
///     redact_url("host=db user=app password='a b\\' c' dbname=jobs"),
///     "host=db user=app password='***' dbname=jobs"
/// );
/// // Nothing secret: unchanged.
/// assert_eq!(redact_url("postgres://app@db/jobs"), "postgres://app@db/jobs");
/// ```
pub fn redact_url(url: &str) -> String {
    let lead = url.len() - url.trim_start().len();
    match scheme_len(&url[lead..]) {
        Some(scheme) => redact_url_form(url, lead + scheme),
        None => redact_text(url),
    }
}

/// Removes passwords from free text that may embed connection strings, such as an error message
/// quoting a URL.
///
/// Finds, anywhere in `text`:
///
/// - URLs (`scheme://...`, up to the next whitespace), redacted as by [`redact_url`]. When the
///   whitespace comes while the user info is still open (`scheme://user:` and no `@` yet), the
///   password is taken to contain a space and to run to the last `@` on that line;
/// - `key=value` pairs (spaces around `=` allowed) whose key is secret by the same rule as a
///   query parameter (any case, e.g. `PGPASSWORD=`, `sslpassword = '...'`, `--token=`). The
///   value is hidden up to the next whitespace, or up to its closing quote when it starts with
///   `'` or `"`.
///
/// - `key: value` labels and JSON fields whose key names a secret (`is_secret_label`:
///   `Authorization`, `password`, `api_key`, `X-Api-Key`, `client_secret`, `Cookie`, ...), the
///   key quoted or not (`"password": "x"`, `'token': 'x'`, `password: "x"` as Rust's `Debug`
///   writes it, `\"password\":\"x\"` inside an escaped string): a quoted value is hidden up to
///   its closing quote, a `[...]` list whole, an unquoted one up to the next whitespace (or `,`,
///   `}`, `]` after a quoted key); an object (`{`) is not hidden as such, its own fields are
///   judged by the same rule. `Authorization: Basic abc` keeps the scheme and hides the rest;
/// - `Bearer <credentials>` anywhere (any case), and JSON Web Tokens (`eyJ...x.y.z`).
///
/// Known limit: in text (unlike [`redact_url`]) a URL ends at whitespace, so a URL password that
/// contains both an `@` and, after it, a space can show its part after the space.
///
/// ```
/// use scheduler::testing::redact::redact_text;
///
/// assert_eq!(
///     redact_text("cannot connect to `postgres://app:s3cret@db:5432/jobs`: timed out"),
///     "cannot connect to `postgres://app:***@db:5432/jobs`: timed out"
/// );
/// assert_eq!(
///     redact_text("invalid DSN host=db password = 'it''s s3cret' dbname=jobs"),
///     "invalid DSN host=db password = '***' dbname=jobs"
/// );
/// assert_eq!(
///     redact_text(r#"POST /x {"user": "app", "password": "hunter2"} Authorization: Bearer abc.def"#),
///     r#"POST /x {"user": "app", "password": "***"} Authorization: Bearer ***"#
/// );
/// assert_eq!(redact_text("retry in 5s (attempt 3)"), "retry in 5s (attempt 3)");
/// ```
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let at_word_start = text[..i]
            .bytes()
            .next_back()
            .is_none_or(|b| !is_word_byte(b));
        let word = if at_word_start {
            rest.bytes().take_while(|&b| is_word_byte(b)).count()
        } else {
            0
        };
        if word == 0 {
            let c = rest.chars().next().expect("i < text.len()");
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let key = &rest[..word];
        if let Some(scheme) = scheme_len(rest) {
            let end = url_extent(rest, scheme);
            out.push_str(&redact_url_form(&rest[..end], scheme));
            i += end;
        } else if is_jwt(key) {
            out.push_str(MASK);
            i += word;
        } else if is_secret_key(key)
            && let Some(value) = keyword_value(rest, word)
        {
            out.push_str(&rest[..value.start]);
            push_masked(&mut out, &rest[value.clone()]);
            i += value.end;
        } else if let Some(hidden) = (key.eq_ignore_ascii_case("bearer"))
            .then(|| credentials_after(rest, word))
            .flatten()
            .or_else(|| {
                // A cheap look for the `:` first: this runs for every word of every log line.
                let colon = rest.as_bytes()[word..].iter().take(8).any(|&b| b == b':');
                (colon && is_secret_label(key))
                    .then(|| labelled_value(rest, word))
                    .flatten()
            })
        {
            out.push_str(&rest[..hidden.start]);
            out.push_str(MASK);
            i += hidden.end;
        } else {
            out.push_str(&rest[..word]);
            i += word;
        }
    }
    out
}

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

/// Bytes of a word: a keyword, a URL scheme, or a flag like `--token`.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'+')
}

/// The length of `scheme://` when `s` starts with one.
fn scheme_len(s: &str) -> Option<usize> {
    if !s.as_bytes().first()?.is_ascii_alphabetic() {
        return None;
    }
    let name = s
        .bytes()
        .take_while(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        .count();
    s[name..].starts_with("://").then_some(name + 3)
}

/// Whether a query parameter or `key=value` keyword named `key` holds a secret (see
/// [`SECRET_KEY_HINTS`]); for the crate's other redactions (a parsed URL's query).
pub(crate) fn is_secret_key(key: &str) -> bool {
    let key = percent_encoding::percent_decode_str(key)
        .decode_utf8_lossy()
        .to_ascii_lowercase();
    let word = key.trim_start_matches('-');
    SECRET_KEY_HINTS.iter().any(|hint| key.contains(hint)) || SECRET_KEY_NAMES.contains(&word)
}

/// Whether a label (the key of `key: value`, or of a JSON field) names a secret: stricter than
/// [`is_secret_key`] (a `keyword:` or an `author:` is common in text), by the pieces of the key
/// split at `_`, `-` and `.`: one containing `password`, `passwd`, `passphrase`, `secret`,
/// `token`, `signature`, `credential`, `cookie`, `authoriz` or `authentic`, one ending in `key`
/// (`apikey`, `api_key`, `X-Api-Key`, but not `keyword`), or one of `auth`, `oauth`, `pwd`,
/// `pass`, `pw`, `sig`, `dsn`.
pub(crate) fn is_secret_label(key: &str) -> bool {
    const INSIDE: &[&str] = &[
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "signature",
        "credential",
        "cookie",
        "authoriz",
        "authentic",
    ];
    const WHOLE: &[&str] = &["auth", "oauth", "pwd", "pass", "pw", "sig", "dsn"];
    let key = key.trim_start_matches('-').to_ascii_lowercase();
    key.split(['_', '-', '.', '+']).any(|piece| {
        INSIDE.iter().any(|hint| piece.contains(hint))
            || piece.ends_with("key")
            || WHOLE.contains(&piece)
    })
}

/// Whether `word` is a JSON Web Token: `eyJ` (a base64url `{"`), then three dot-separated parts.
fn is_jwt(word: &str) -> bool {
    word.len() >= 16 && word.starts_with("eyJ") && word.matches('.').count() >= 2
}

/// `from` advanced over spaces and tabs.
fn skip_blanks(bytes: &[u8], from: usize) -> usize {
    from + bytes[from.min(bytes.len())..]
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count()
}

/// The credentials after an authentication scheme word (`Bearer`, `Basic`) that ends at
/// `scheme`: after blanks, up to whitespace, a quote or backquote, `,`, `;`, `)`, `]`, `}` or `\`. `None`
/// without blanks or credentials.
fn credentials_after(text: &str, scheme: usize) -> Option<Range<usize>> {
    let bytes = text.as_bytes();
    let start = skip_blanks(bytes, scheme);
    let len = bytes[start..]
        .iter()
        .take_while(|&&b| {
            !b.is_ascii_whitespace()
                && !matches!(
                    b,
                    b'"' | b'\'' | b'`' | b',' | b';' | b')' | b']' | b'}' | b'\\'
                )
        })
        .count();
    (start > scheme && len > 0).then_some(start..start + len)
}

/// Where a JSON string escaped once more (`\"a \\\" b\"`, as `Debug` quotes a JSON document)
/// that starts at `from` ends: at the first `\"` that is not, once unescaped, JSON's own
/// escaped quote. Unterminated: the end of the text.
fn escaped_string_end(bytes: &[u8], from: usize) -> usize {
    let mut k = from;
    let mut json_escape = false;
    while k < bytes.len() {
        // One level unescaped: `\\` is `\`, `\"` is `"`, anything else itself.
        let (unescaped, width) = match (bytes[k], bytes.get(k + 1)) {
            (b'\\', Some(&next)) => (next, 2),
            (b, _) => (b, 1),
        };
        if unescaped == b'"' && width == 2 && !json_escape {
            return k;
        }
        json_escape = unescaped == b'\\' && !json_escape;
        k += width;
    }
    bytes.len()
}

/// What to hide of the `key: value` at the start of `text` (whose key is `key` bytes, maybe
/// followed by its closing quote: `"`, `'` or an escaped `\"`): the value without its quotes,
/// a `[...]` list's inside, or an authentication scheme's credentials. `None` when no `:`
/// follows (or `::`, a path), the value is empty or an object.
fn labelled_value(text: &str, key: usize) -> Option<Range<usize>> {
    let bytes = text.as_bytes();
    let mut k = key;
    let quoted_key = if bytes[k..].starts_with(b"\\\"") {
        k += 2;
        true
    } else if matches!(bytes.get(k), Some(b'"' | b'\'')) {
        k += 1;
        true
    } else {
        false
    };
    k = skip_blanks(bytes, k);
    if bytes.get(k) != Some(&b':') || bytes.get(k + 1) == Some(&b':') {
        return None;
    }
    let start = skip_blanks(bytes, k + 1);
    let inside = |from: usize, to: usize| (to > from).then_some(from..to);
    match *bytes.get(start)? {
        b'\\' if bytes[start..].starts_with(b"\\\"") => {
            let from = start + 2;
            inside(from, escaped_string_end(bytes, from))
        }
        quote @ (b'"' | b'\'') => {
            let end = quoted_end(bytes, start, quote);
            let closed = end > start + 1 && bytes[end - 1] == quote && end <= bytes.len();
            inside(start + 1, if closed { end - 1 } else { end })
        }
        b'[' => {
            let mut depth = 0usize;
            let close = bytes[start..].iter().position(|&b| {
                match b {
                    b'[' => depth += 1,
                    b']' => depth -= 1,
                    _ => {}
                }
                depth == 0
            });
            inside(start + 1, close.map_or(text.len(), |c| start + c))
        }
        b'{' => None,
        b if b.is_ascii_whitespace() => None,
        _ => {
            let end = start
                + bytes[start..]
                    .iter()
                    .take_while(|&&b| {
                        !(b.is_ascii_whitespace() || quoted_key && matches!(b, b',' | b'}' | b']'))
                    })
                    .count();
            const SCHEMES: &[&str] = &["bearer", "basic", "digest", "token", "negotiate", "ntlm"];
            let word = &text[start..end];
            if SCHEMES.iter().any(|s| word.eq_ignore_ascii_case(s))
                && let Some(credentials) = credentials_after(text, end)
            {
                return Some(credentials);
            }
            inside(start, end)
        }
    }
}

/// `url` redacted, where `url[..authority]` is `scheme://` (with any leading whitespace).
fn redact_url_form(url: &str, authority: usize) -> String {
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
fn url_extent(text: &str, scheme: usize) -> usize {
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

/// The value of the `key = value` pair at the start of `text` (whose key is `key` bytes), as a
/// byte range of `text` including any quotes; `None` when no `=` follows or the value is empty.
fn keyword_value(text: &str, key: usize) -> Option<Range<usize>> {
    let bytes = text.as_bytes();
    let blanks = |from: usize| {
        from + bytes[from..]
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count()
    };
    let eq = blanks(key);
    if bytes.get(eq) != Some(&b'=') {
        return None;
    }
    let start = blanks(eq + 1);
    let first = *bytes.get(start)?;
    let end = match first {
        b'\'' | b'"' => quoted_end(bytes, start, first),
        _ if first.is_ascii_whitespace() => return None,
        _ => {
            // Unquoted, libpq style: up to whitespace, `\` escaping the next byte.
            let mut k = start;
            while let Some(&b) = bytes.get(k) {
                if b == b'\\' {
                    k += 2;
                } else if b.is_ascii_whitespace() {
                    break;
                } else {
                    k += 1;
                }
            }
            k.min(bytes.len())
        }
    };
    Some(start..end)
}

/// The end (after the closing quote) of the value quoted by `quote` at `bytes[open]`: `\` escapes
/// the next byte and a doubled quote stands for one. Unterminated: the end of the text.
fn quoted_end(bytes: &[u8], open: usize, quote: u8) -> usize {
    let mut k = open + 1;
    while let Some(&b) = bytes.get(k) {
        if b == b'\\' {
            k += 2;
        } else if b == quote {
            if bytes.get(k + 1) == Some(&quote) {
                k += 2;
            } else {
                return k + 1;
            }
        } else {
            k += 1;
        }
    }
    bytes.len()
}

/// Appends `***` in place of `value`, keeping its quotes; an empty value stays empty.
fn push_masked(out: &mut String, value: &str) {
    let quote = value.chars().next().filter(|c| matches!(c, '\'' | '"'));
    match quote {
        Some(q) if value.len() == 2 && value.ends_with(q) => out.push_str(value),
        Some(q) => {
            out.push(q);
            out.push_str(MASK);
            out.push(q);
        }
        None if value.is_empty() => {}
        None => out.push_str(MASK),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn urls() {
        let cases = [
            // (input, expected)
            (
                "postgres://app:s3cret@db.example:5432/x",
                "postgres://app:***@db.example:5432/x",
            ),
            (
                "postgres://app:s3cr:et@db.example:5432/x?sslmode=disable",
                "postgres://app:***@db.example:5432/x?sslmode=disable",
            ),
            (
                "postgres://app:pa/ss?w#o@rd@db:5432/x",
                "postgres://app:***@db:5432/x",
            ),
            ("postgres://app:p@ss@db/x", "postgres://app:***@db/x"),
            ("postgres://app:p%40ss@db/x", "postgres://app:***@db/x"),
            ("postgres://app:a b c@db/x", "postgres://app:***@db/x"),
            // An unencoded `@` in the user name.
            ("postgres://me@corp:pw@db/x", "postgres://me@corp:***@db/x"),
            (
                "  postgresql://app:pw@[::1]:5432/x",
                "  postgresql://app:***@[::1]:5432/x",
            ),
            ("redis://:pw@cache:6379/0", "redis://:***@cache:6379/0"),
            // Multi-host (libpq), both schemes, and the password in the query as well.
            (
                "postgres://app:s3cret@h1:5432,h2:5433/db?target_session_attrs=read-write",
                "postgres://app:***@h1:5432,h2:5433/db?target_session_attrs=read-write",
            ),
            (
                "postgresql://app:s3%2Fcr%40et@h1,h2/db?password=s4&sslmode=require",
                "postgresql://app:***@h1,h2/db?password=***&sslmode=require",
            ),
            (
                "https://deploy:t0k@config.example/tasks.json",
                "https://deploy:***@config.example/tasks.json",
            ),
            // No password: unchanged.
            (
                "postgres://postgres@127.0.0.1:5432/test",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
            ("postgres://app:@db/x", "postgres://app:@db/x"),
            ("postgres://db:5432/x", "postgres://db:5432/x"),
            ("postgres:///x?host=/run/pg", "postgres:///x?host=/run/pg"),
            ("http://h.example/a:b", "http://h.example/a:b"),
            // An `@` after the host: over-redacted, never under.
            (
                "postgres://app:pw@db/x?application_name=a@b",
                "postgres://app:***@b",
            ),
            ("postgres://db:5432/x?email=a@b", "postgres://db:***@b"),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_url(input), expected, "input: {input}");
        }
    }

    #[test]
    fn query_parameters() {
        let cases = [
            (
                "postgres://app@h/x?password=hunter2&sslmode=disable",
                "postgres://app@h/x?password=***&sslmode=disable",
            ),
            (
                "postgres://h/x?sslmode=verify-full&sslpassword=k3y",
                "postgres://h/x?sslmode=verify-full&sslpassword=***",
            ),
            (
                "postgres://h/x?PassWord=a&DB_PASSWD=b&client_secret=c&access_token=d&env=prod",
                "postgres://h/x?PassWord=***&DB_PASSWD=***&client_secret=***&access_token=***&env=prod",
            ),
            // Percent-encoded names (`%77` is `w`, `%5F` is `_`) and values.
            (
                "postgres://h/x?pass%77ord=a%26b&ssl%5Fpassword=c",
                "postgres://h/x?pass%77ord=***&ssl%5Fpassword=***",
            ),
            // Unencoded `&`, `#` and `=` inside a secret value: hidden up to the next `&name=`.
            (
                "postgres://h/x?password=a&b#c=d&sslmode=require",
                "postgres://h/x?password=***&sslmode=require",
            ),
            ("postgres://h/x?token=a&b#frag", "postgres://h/x?token=***"),
            // Both forms at once, and a `?` in the user-info password.
            (
                "postgres://app:p?w@h/x?password=q",
                "postgres://app:***@h/x?password=***",
            ),
            // Not secret, empty, or in the fragment: unchanged.
            (
                "postgres://h/x?sslmode=require&application_name=jobs#password=x",
                "postgres://h/x?sslmode=require&application_name=jobs#password=x",
            ),
            ("postgres://h/x?password=", "postgres://h/x?password="),
            // Webhook and API styles: keys, signatures, credentials.
            (
                "https://hooks.example/x?api_key=k1&Signature=s2&sig=s3&X-Amz-Credential=c4&page=2",
                "https://hooks.example/x?api_key=***&Signature=***&sig=***&X-Amz-Credential=***&page=2",
            ),
            ("postgres://h/x?password", "postgres://h/x?password"),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_url(input), expected, "input: {input}");
        }
    }

    #[test]
    fn keyword_value_strings() {
        let cases = [
            (
                "host=db user=app password=secret dbname=x",
                "host=db user=app password=*** dbname=x",
            ),
            (
                "host=db password = 'it''s s3cret' dbname=x",
                "host=db password = '***' dbname=x",
            ),
            (
                r"host=db password='a b\' c' dbname=x",
                "host=db password='***' dbname=x",
            ),
            (
                r"host=db password='back\\slash' dbname=x",
                "host=db password='***' dbname=x",
            ),
            (
                r"host=db password=un\ quoted\'s dbname=x",
                "host=db password=*** dbname=x",
            ),
            (
                "HOST=db PassWord=Secret SSLPASSWORD='k 3y' dbname=x",
                "HOST=db PassWord=*** SSLPASSWORD='***' dbname=x",
            ),
            (
                "sslpassword=k3y sslmode=require",
                "sslpassword=*** sslmode=require",
            ),
            ("password=\tsecret", "password=\t***"),
            // Unterminated quote: hidden to the end.
            ("password='never closed dbname=x", "password='***'"),
            // Empty: nothing to hide.
            ("password='' dbname=x", "password='' dbname=x"),
            ("password= ", "password= "),
            // No secret keyword: unchanged.
            ("host=db user=app dbname=x", "host=db user=app dbname=x"),
            // A key that merely contains a hint counts as secret: over-redacted, never under.
            ("passwordless=true", "passwordless=***"),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_url(input), expected, "input: {input}");
        }
    }

    #[test]
    fn text() {
        let cases = [
            (
                "`postgres://app:s3cret@db:5432/x` is not a usable PostgreSQL URL: invalid port",
                "`postgres://app:***@db:5432/x` is not a usable PostgreSQL URL: invalid port",
            ),
            // A secret value at the end of a URL in text runs to the whitespace, `)` included.
            (
                "error sending request for url (https://u:pw@h.example/t?token=abc)",
                "error sending request for url (https://u:***@h.example/t?token=***",
            ),
            (
                "jdbc:postgresql://h/x?user=app&password=pw next",
                "jdbc:postgresql://h/x?user=app&password=*** next",
            ),
            // A space in a URL password: the URL runs to the last `@` of the line.
            (
                "failed: postgres://app:a b@db/x: refused\nnext line a@b",
                "failed: postgres://app:***@db/x: refused\nnext line a@b",
            ),
            // Two URLs in one message are redacted separately.
            (
                "from http://a:1@h1/x to http://b:2@h2/y",
                "from http://a:***@h1/x to http://b:***@h2/y",
            ),
            (
                "PGPASSWORD=hunter2 psql --token=t0k -h db",
                "PGPASSWORD=*** psql --token=*** -h db",
            ),
            (
                r#"config: password="a \" b" db.password=c, api_secret = 'd e'."#,
                r#"config: password="***" db.password=*** api_secret = '***'."#,
            ),
            (
                "le mot de passe épassword=x",
                "le mot de passe épassword=***",
            ),
            // Words that merely contain a hint, without `=`, are text.
            (
                "password authentication failed for user \"app\"; token expired",
                "password authentication failed for user \"app\"; token expired",
            ),
            (
                "http://127.0.0.1:8080/tasks: 500",
                "http://127.0.0.1:8080/tasks: 500",
            ),
            ("", ""),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_text(input), expected, "input: {input}");
        }
    }

    #[test]
    fn bearer_labels_and_json_fields() {
        let cases = [
            // Authorization headers, as logged by hand or by an HTTP client's `Debug`.
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",
                "Authorization: Bearer ***",
            ),
            (
                "authorization: basic dXNlcjpwYXNz",
                "authorization: basic ***",
            ),
            (
                "Proxy-Authorization:Bearer t0k3n!",
                "Proxy-Authorization:Bearer ***",
            ),
            (
                r#"headers: {"authorization": "Bearer t0k3n", "accept": "*/*"}"#,
                r#"headers: {"authorization": "***", "accept": "*/*"}"#,
            ),
            ("X-Api-Key: k3y-value next", "X-Api-Key: *** next"),
            ("Cookie: session=abc; theme=dark", "Cookie: *** theme=dark"),
            // Bearer credentials anywhere, and a JWT on its own.
            (
                "calling with bearer abc.def-ghi_jkl~mno+/= then",
                "calling with bearer *** then",
            ),
            ("curl -H 'Bearer xyz' /x", "curl -H 'Bearer ***' /x"),
            ("send `Bearer <token>`", "send `Bearer ***`"),
            (
                "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl expired",
                "token *** expired",
            ),
            // `key: value` (YAML, Rust's `Debug`).
            ("password: hunter2", "password: ***"),
            ("db_password : 'a b c' ok", "db_password : '***' ok"),
            (
                r#"Config { user: "app", password: "hun\"ter2", port: 5432 }"#,
                r#"Config { user: "app", password: "***", port: 5432 }"#,
            ),
            ("client_secret:s3 rest", "client_secret:*** rest"),
            // JSON fields named like secrets, any value.
            (
                r#"{"user":"app","password":"hunter2","api_key":12345,"tokens":["a","b"],"n":1}"#,
                r#"{"user":"app","password":"***","api_key":***,"tokens":[***],"n":1}"#,
            ),
            (
                r#"{'password': 'x y', 'refresh_token': null}"#,
                r#"{'password': '***', 'refresh_token': ***}"#,
            ),
            // Nested: the object is not hidden whole, its secret fields are.
            (
                r#"{"credentials": {"user": "u", "secret": "s"}}"#,
                r#"{"credentials": {"user": "u", "secret": "***"}}"#,
            ),
            // JSON inside an escaped string (a `Debug`ged body).
            (
                r#"body="{\"password\":\"hunter2\",\"user\":\"app\"}""#,
                r#"body="{\"password\":\"***\",\"user\":\"app\"}""#,
            ),
            // The `=` forms.
            ("api_key=k1 apikey = k2", "api_key=*** apikey = ***"),
            // Labels that do not name a secret, paths and empty values: unchanged.
            ("keyword: select", "keyword: select"),
            ("author: Jane", "author: Jane"),
            ("password::hash(x)", "password::hash(x)"),
            ("password:", "password:"),
            ("password: \nnext", "password: \nnext"),
            (r#"{"password": ""}"#, r#"{"password": ""}"#),
            ("the bearer", "the bearer"),
            ("error: timed out", "error: timed out"),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_text(input), expected, "input: {input}");
        }
    }

    /// Printable ASCII, space, quotes, backslash and URL delimiters included.
    fn password() -> impl Strategy<Value = String> {
        "[ -~]{1,24}"
    }

    /// `pw` quoted for a libpq keyword/value string.
    fn libpq_quoted(pw: &str) -> String {
        format!("'{}'", pw.replace('\\', r"\\").replace('\'', r"\'"))
    }

    /// `pw` unquoted for a libpq keyword/value string: whitespace, quotes and `\` escaped.
    fn libpq_unquoted(pw: &str) -> String {
        pw.chars()
            .flat_map(|c| {
                let escape = c == '\\' || c == '\'' || c == '"' || c.is_whitespace();
                escape.then_some('\\').into_iter().chain([c])
            })
            .collect()
    }

    /// The honest check: the output must be exactly `expected`, which does not depend on the
    /// password, so it carries nothing of it. "Does not contain the password" is checked too,
    /// unless the password is short or happens to be a piece of the fixed text around it (a
    /// password of `5432` is in `h:5432` whatever the redactor does).
    fn assert_hidden(output: &str, expected: &str, pw: &str) -> Result<(), TestCaseError> {
        prop_assert_eq!(output, expected);
        if pw.len() >= 4 && !expected.contains(pw) {
            prop_assert!(!output.contains(pw));
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn url_passwords_never_show(pw in password(), query in prop::bool::ANY) {
            let query = if query { "?sslmode=require&application_name=jobs" } else { "" };
            let url = format!("postgres://u:{pw}@h:5432/db{query}");
            assert_hidden(&redact_url(&url), &format!("postgres://u:***@h:5432/db{query}"), &pw)?;
        }

        #[test]
        fn query_passwords_never_show(pw in password()) {
            let encoded = percent_encoding::utf8_percent_encode(&pw, percent_encoding::NON_ALPHANUMERIC);
            let url = format!("postgres://h:5432/db?password={encoded}&sslmode=require");
            assert_hidden(&redact_url(&url), "postgres://h:5432/db?password=***&sslmode=require", &pw)?;
        }

        #[test]
        fn keyword_passwords_never_show(pw in password()) {
            let dsn = format!("host=h user=u password={} dbname=db", libpq_quoted(&pw));
            assert_hidden(&redact_url(&dsn), "host=h user=u password='***' dbname=db", &pw)?;
            let dsn = format!("host=h password={} dbname=db", libpq_unquoted(&pw));
            assert_hidden(&redact_url(&dsn), "host=h password=*** dbname=db", &pw)?;
        }

        #[test]
        fn json_and_debug_secrets_never_show(pw in password()) {
            let json = serde_json::json!({"user": "u", "password": pw}).to_string();
            assert_hidden(
                &redact_text(&format!("request body: {json}")),
                r#"request body: {"password":"***","user":"u"}"#,
                &pw,
            )?;
            // The same document quoted again (a `Debug`ged string of it).
            let escaped = format!("body={:?}", json);
            assert_hidden(
                &redact_text(&escaped),
                r#"body="{\"password\":\"***\",\"user\":\"u\"}""#,
                &pw,
            )?;
            let debug = format!("Login {{ user: \"u\", password: {pw:?} }}");
            assert_hidden(&redact_text(&debug), r#"Login { user: "u", password: "***" }"#, &pw)?;
        }

        #[test]
        fn bearer_tokens_never_show(token in "[A-Za-z0-9._~+/-]{1,40}=*") {
            let line = format!("GET /x Authorization: Bearer {token} (attempt 2)");
            assert_hidden(&redact_text(&line), "GET /x Authorization: Bearer *** (attempt 2)", &token)?;
            let line = format!("sent bearer {token}");
            assert_hidden(&redact_text(&line), "sent bearer ***", &token)?;
        }

        /// In text a URL ends at whitespace, so the password has no whitespace, or no `@` (see
        /// the known limit on `redact_text`).
        #[test]
        fn passwords_in_text_never_show(
            pw in prop_oneof!["[!-~]{1,24}", "[ -?A-~]{1,24}"],
        ) {
            let text = format!("error: `postgres://u:{pw}@h:5432/db`: timed out (attempt 2)");
            assert_hidden(
                &redact_text(&text),
                "error: `postgres://u:***@h:5432/db`: timed out (attempt 2)",
                &pw,
            )?;
            let text = format!("bad DSN host=h password = {} dbname=db: refused", libpq_quoted(&pw));
            assert_hidden(&redact_text(&text), "bad DSN host=h password = '***' dbname=db: refused", &pw)?;
        }
    }
}
