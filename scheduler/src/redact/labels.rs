//! Secrets that free text states other than in a URL: `key=value` keywords, `key: value`
//! labels and JSON fields, authentication credentials and JSON Web Tokens.

use std::ops::Range;

/// Whether `word` is a JSON Web Token: `eyJ` (a base64url `{"`), then three dot-separated parts.
pub(super) fn is_jwt(word: &str) -> bool {
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
pub(super) fn credentials_after(text: &str, scheme: usize) -> Option<Range<usize>> {
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
pub(super) fn labelled_value(text: &str, key: usize) -> Option<Range<usize>> {
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

/// The value of the `key = value` pair at the start of `text` (whose key is `key` bytes), as a
/// byte range of `text` including any quotes; `None` when no `=` follows or the value is empty.
pub(super) fn keyword_value(text: &str, key: usize) -> Option<Range<usize>> {
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
