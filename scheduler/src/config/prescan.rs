//! The checks a config document's text passes before a parser sees it: its size and how deep it
//! nests.
//!
//! serde_json, toml and serde_norway each read a document of any size and depth; a YAML document
//! 64k levels deep keeps libyaml busy for seconds, and a deep enough one can exhaust a thread's
//! stack. So [`ConfigDocument::parse`](super::ConfigDocument::parse) first makes one linear pass
//! over the text here and refuses it, naming the limit, when it is larger than
//! [`CONFIG_DOCUMENT_BYTES`] or nests deeper than [`CONFIG_DOCUMENT_DEPTH`] (both in
//! `docs/limits.md`).
//!
//! The pass is a tokenizer, not a parser: it skips strings and comments and counts the opening
//! brackets and braces of flow collections, the dots of dotted keys (TOML) and the indentation
//! levels and `- ` entries of block collections (YAML). It errs on the side of counting: text a
//! parser would read as a string is never skipped unless it surely is one, so a document cannot
//! hide its depth from this pass; a plain YAML scalar with stray `[` in it may be counted as
//! nesting (quote it).

use crate::bounds::{CONFIG_DOCUMENT_BYTES, CONFIG_DOCUMENT_DEPTH};

use super::ConfigFormat;

/// Why a text was refused before parsing, and where (1-based line and column, in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused {
    pub(super) line: Option<usize>,
    pub(super) column: Option<usize>,
    pub(super) message: String,
}

/// What a source says of a document it stopped reading at the size limit.
pub(super) fn too_large() -> String {
    format!(
        "the document is larger than the limit of {} bytes (`config document size, in bytes` \
         in docs/limits.md); it was not read further",
        CONFIG_DOCUMENT_BYTES.max
    )
}

/// For other documents read in these formats (the channels file): `Ok`, or why `text` is
/// refused before parsing, with its position.
#[cfg_attr(not(feature = "webhook"), allow(dead_code))]
pub(crate) fn check_text(text: &str, format: ConfigFormat) -> Result<(), String> {
    check(text, format).map_err(|refused| match (refused.line, refused.column) {
        (Some(line), Some(column)) => {
            format!("at line {line}, column {column}: {}", refused.message)
        }
        _ => refused.message,
    })
}

/// Refuses `text` when it is larger or deeper than the limits.
pub(super) fn check(text: &str, format: ConfigFormat) -> Result<(), Refused> {
    let max_bytes = CONFIG_DOCUMENT_BYTES.max;
    if text.len() as u64 > max_bytes {
        return Err(Refused {
            line: None,
            column: None,
            message: format!(
                "the document is {} bytes, larger than the limit of {max_bytes} bytes \
                 (`config document size, in bytes` in docs/limits.md); it was not parsed",
                text.len()
            ),
        });
    }
    let max_depth = usize::try_from(CONFIG_DOCUMENT_DEPTH.max).unwrap_or(usize::MAX);
    let deepest = match format {
        ConfigFormat::Json => json_depth(text, max_depth),
        ConfigFormat::Toml => toml_depth(text, max_depth),
        ConfigFormat::Yaml => yaml_depth(text, max_depth),
    };
    match deepest {
        None => Ok(()),
        Some(offset) => {
            let (line, column) = super::document::line_column(text, offset);
            Err(Refused {
                line: Some(line),
                column: Some(column),
                message: format!(
                    "the document nests deeper than the limit of {max_depth} levels \
                     (`config document nesting depth` in docs/limits.md); it was not parsed"
                ),
            })
        }
    }
}

/// The byte offset where a JSON text first nests deeper than `max`, if it does.
fn json_depth(text: &str, max: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = skip_escaped_string(bytes, i, b'"'),
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Some(i);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// From the opening quote at `start`, the index of the closing quote (a backslash escapes the
/// next byte), or the end of the text.
fn skip_escaped_string(bytes: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b if b == quote => return i,
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// The index of `needle` in `bytes` at or after `from`, or the end of the text.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> usize {
    bytes
        .get(from..)
        .and_then(|rest| rest.windows(needle.len()).position(|w| w == needle))
        .map_or(bytes.len(), |p| from + p)
}

/// The byte offset where a TOML text first nests deeper than `max`, if it does: arrays and
/// inline tables, plus the tables of the current header and of a dotted key.
fn toml_depth(text: &str, max: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    // The arrays (`[`) and inline tables (`{`) open, and whether a header is being read.
    let mut open: Vec<u8> = Vec::new();
    let mut in_header = false;
    // Whether a key is being read (dots separate tables there; elsewhere they are in numbers
    // and dates), and the dots read in it so far.
    let mut in_key = true;
    let mut key_dots = 0usize;
    // Tables the last header opened (`[a.b]`: 2), none before the first header.
    let mut table_depth = 0usize;
    let mut at_line_start = true;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let line_start = at_line_start;
        at_line_start = false;
        match b {
            b'\n' => {
                at_line_start = true;
                if open.is_empty() {
                    in_key = true;
                    key_dots = 0;
                }
            }
            b' ' | b'\t' | b'\r' => at_line_start = line_start,
            b'#' => {
                i = find(bytes, i, b"\n");
                continue;
            }
            b'"' if bytes[i..].starts_with(b"\"\"\"") => {
                i = skip_escaped_multiline(bytes, i + 3, b"\"\"\"");
            }
            b'\'' if bytes[i..].starts_with(b"\'\'\'") => {
                i = find(bytes, i + 3, b"\'\'\'") + 2;
            }
            b'"' => i = skip_escaped_string(bytes, i, b'"'),
            b'\'' => i = find(bytes, i + 1, b"'"),
            b'[' | b'{' => {
                if line_start && open.is_empty() && b == b'[' {
                    in_header = true;
                    key_dots = 0;
                }
                open.push(b);
                in_key = in_header || b == b'{';
                key_dots = if in_header { key_dots } else { 0 };
                if open.len() + table_depth > max {
                    return Some(i);
                }
            }
            b']' | b'}' => {
                open.pop();
                if in_header && open.is_empty() {
                    in_header = false;
                    table_depth = key_dots + 1;
                }
                in_key = false;
                key_dots = 0;
            }
            b'.' if in_key => {
                key_dots += 1;
                let depth = if in_header {
                    1 + key_dots
                } else {
                    open.len() + table_depth + 1 + key_dots
                };
                if depth > max {
                    return Some(i);
                }
            }
            b'=' => {
                in_key = false;
                key_dots = 0;
            }
            b',' => {
                in_key = open.last() == Some(&b'{');
                key_dots = 0;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Past a multi-line basic string that started before `from`: the index of the last byte of
/// its closing `end`, or the end of the text.
fn skip_escaped_multiline(bytes: &[u8], from: usize, end: &[u8]) -> usize {
    let mut i = from;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i..].starts_with(end) {
            return i + end.len() - 1;
        }
        i += 1;
    }
    bytes.len()
}

/// The byte offset where a YAML text first nests deeper than `max`, if it does.
///
/// Block collections are measured by indentation: each line opens a level one deeper than the
/// line it is indented under, and each `- ` or `? ` entry on it one more (its content's column
/// is where its siblings are written). Flow collections (`[`, `{`) add one each while open. The
/// content lines of a block scalar (`key: |`) are text and skipped. Quoted scalars are skipped
/// only when they start where a node starts and end on the same line; anything else is
/// scanned, so nothing a parser would read as structure is ever skipped.
fn yaml_depth(text: &str, max: usize) -> Option<usize> {
    // (column, depth, is a sequence) of the block nodes open, innermost last.
    let mut open: Vec<(usize, usize, bool)> = Vec::new();
    let mut flow = 0usize;
    // The depth of the last block line, under which a multi-line flow collection sits.
    let mut line_depth = 0usize;
    // The column a block scalar's content must be indented beyond, while reading one.
    let mut block_scalar: Option<usize> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let bytes = line.as_bytes();
        let indent = bytes.iter().take_while(|b| **b == b' ').count();
        let rest = &bytes[indent..];
        let blank = rest.iter().all(u8::is_ascii_whitespace);
        if let Some(column) = block_scalar {
            if blank || indent > column {
                continue;
            }
            block_scalar = None;
        }
        if blank || rest.starts_with(b"#") {
            continue;
        }
        if flow == 0 {
            // A sequence written at its key's column (`tasks:` then `- name: a`) is the key's
            // value, one level deeper; at a sequence's column, the next entry of it.
            let is_entry = is_entry(rest);
            while open.last().is_some_and(|&(column, _, seq)| {
                column > indent || (column == indent && (seq || !is_entry))
            }) {
                open.pop();
            }
            line_depth = open.last().map_or(0, |(_, depth, _)| *depth) + 1;
            open.push((indent, line_depth, is_entry));
        }
        if line_depth + flow > max {
            return Some(start + indent);
        }
        // Scan the line; `node_start`: the next character begins a node.
        let mut node_start = true;
        let mut last_token_is_block_indicator = false;
        let mut i = indent;
        while i < bytes.len() {
            let b = bytes[i];
            let next_is_space = bytes.get(i + 1).is_none_or(u8::is_ascii_whitespace);
            if !b.is_ascii_whitespace() {
                last_token_is_block_indicator = false;
            }
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b'#' if i == 0 || bytes[i - 1].is_ascii_whitespace() => break,
                b'-' | b'?' if node_start && flow == 0 && next_is_space => {
                    let content = i + 1 + bytes[i + 1..].iter().take_while(|b| **b == b' ').count();
                    line_depth += 1;
                    open.push((content, line_depth, is_entry(&bytes[content..])));
                    if line_depth > max {
                        return Some(start + i);
                    }
                }
                b'|' | b'>' if node_start && flow == 0 => {
                    // A block scalar's header: `|`, `>-`, `|2+`.
                    while i + 1 < bytes.len() && matches!(bytes[i + 1], b'-' | b'+' | b'0'..=b'9') {
                        i += 1;
                    }
                    last_token_is_block_indicator = true;
                    node_start = false;
                }
                b'\'' | b'"' if node_start => {
                    let close = if b == b'"' {
                        skip_escaped_string(bytes, i, b'"')
                    } else {
                        skip_single_quoted(bytes, i)
                    };
                    // Not closed on this line: the rest is scanned as if it were structure.
                    if close < bytes.len() {
                        i = close;
                    }
                    node_start = false;
                }
                b'&' | b'!' if node_start => {
                    // An anchor or a tag: the node starts after it.
                    while i + 1 < bytes.len() && !bytes[i + 1].is_ascii_whitespace() {
                        i += 1;
                    }
                }
                b'[' | b'{' => {
                    flow += 1;
                    node_start = true;
                    if line_depth + flow > max {
                        return Some(start + i);
                    }
                }
                b']' | b'}' => {
                    flow = flow.saturating_sub(1);
                    node_start = false;
                }
                b',' if flow > 0 => node_start = true,
                b':' if next_is_space || flow > 0 => node_start = true,
                _ => node_start = false,
            }
            i += 1;
        }
        if last_token_is_block_indicator {
            block_scalar = open.last().map(|(column, _, _)| *column);
        }
    }
    None
}

/// Whether a YAML line's content (from its indentation on) is a sequence or set entry (`- `,
/// `? `).
fn is_entry(content: &[u8]) -> bool {
    matches!(content.first(), Some(b'-' | b'?'))
        && content.get(1).is_none_or(u8::is_ascii_whitespace)
}

/// From the opening quote at `start` of a single-quoted scalar (`''` is a quote inside it), the
/// index of its closing quote, or the end of the line.
fn skip_single_quoted(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return i;
        }
        i += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(text: &str, format: ConfigFormat, max: usize) -> bool {
        match format {
            ConfigFormat::Json => json_depth(text, max).is_none(),
            ConfigFormat::Toml => toml_depth(text, max).is_none(),
            ConfigFormat::Yaml => yaml_depth(text, max).is_none(),
        }
    }

    #[test]
    fn json_depth_counts_brackets_outside_strings() {
        assert!(depth_ok(r#"{"a": [[1]]}"#, ConfigFormat::Json, 3));
        assert!(!depth_ok(r#"{"a": [[[1]]]}"#, ConfigFormat::Json, 3));
        assert!(depth_ok(r#"{"a": "[[[[\"[[[["}"#, ConfigFormat::Json, 1));
    }

    #[test]
    fn toml_depth_counts_arrays_tables_and_dotted_keys() {
        assert!(depth_ok("[[tasks]]\nname = \"a\"\n", ConfigFormat::Toml, 2));
        assert!(!depth_ok("a = [[[1]]]\n", ConfigFormat::Toml, 2));
        assert!(!depth_ok("a.b.c.d = 1\n", ConfigFormat::Toml, 3));
        assert!(!depth_ok("[a.b.c]\nd.e = 1\n", ConfigFormat::Toml, 4));
        assert!(depth_ok(
            "a = \"[[[.....\" # [[[[ ....\n",
            ConfigFormat::Toml,
            1
        ));
        assert!(depth_ok(
            "x = [1.5, 2.5, 3.5, 4.5]\nb = 1.5\n",
            ConfigFormat::Toml,
            2
        ));
        assert!(!depth_ok("x = [{a.b.c = 1}]\n", ConfigFormat::Toml, 4));
    }

    #[test]
    fn yaml_depth_counts_indentation_entries_and_flows() {
        let ok = "tasks:\n  - name: a\n    calendar: {weekly: [{days: [sat]}]}\n";
        assert!(depth_ok(ok, ConfigFormat::Yaml, 7));
        assert!(!depth_ok(ok, ConfigFormat::Yaml, 6));
        assert!(depth_ok("- - - - a\n", ConfigFormat::Yaml, 5));
        assert!(!depth_ok("- - - - a\n", ConfigFormat::Yaml, 4));
        // Compact entries under compact entries: each line's entries count from its parent's.
        let compact = "- - a:\n    - - b:\n        - - c: 1\n";
        assert!(!depth_ok(compact, ConfigFormat::Yaml, 8));
        // A block scalar's text is not structure.
        let script = "a: |\n  if x:\n    if y:\n      if z: [[[\nb: 1\n";
        assert!(depth_ok(script, ConfigFormat::Yaml, 2));
        assert!(!depth_ok("a:\n b:\n  c:\n   d: 1\n", ConfigFormat::Yaml, 3));
        assert!(depth_ok(
            "a: '[[[['\nb: \"{{{{\" # [[[[\n",
            ConfigFormat::Yaml,
            1
        ));
        // An apostrophe inside a plain scalar does not open a quote that would hide the rest.
        assert!(!depth_ok("a: don't\nb: [[[[1]]]]\n", ConfigFormat::Yaml, 3));
        assert!(!depth_ok("a: &x [[[[1]]]]\n", ConfigFormat::Yaml, 3));
        // A quote left open on its line hides nothing either.
        assert!(!depth_ok(
            "a: |\n  x: 'open\nb: [[[[1]]]]'\n",
            ConfigFormat::Yaml,
            3
        ));
    }
}
