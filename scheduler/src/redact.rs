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

mod args;
mod labels;
mod urls;

pub(crate) use args::serialize_args_text;
pub use args::{hide_secret_values, redact_args, redact_args_text};

use labels::{credentials_after, is_jwt, keyword_value, labelled_value};
pub(crate) use urls::redact_location;
#[cfg(feature = "http-config")]
pub(crate) use urls::redact_parsed_url;
use urls::{redact_url_form, url_extent};

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
mod tests;
