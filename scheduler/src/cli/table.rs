//! How the operator commands print for people: aligned tables, instants, durations, and the
//! task names near a mistyped one. Nothing here reads the database.

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};

/// `text` safe to print on a terminal: control characters (an escape sequence a handler logged
/// or an operator typed into a pause reason can move the cursor, rewrite earlier lines or set
/// the window title) and the invisible bidirectional overrides are written as `\x1b`,
/// `\u{202e}`; with `lines`, newlines and tabs stay as they are (a log), else they are escaped
/// too.
pub(crate) fn printable(text: &str, lines: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if lines && matches!(c, '\n' | '\t') || !(c.is_control() || bidi) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    out
}

/// Columns padded to their widest cell, two spaces apart; the last column is not padded.
/// Cells are made [`printable`].
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| printable(cell, false)).collect())
        .collect();
    let rows = &rows;
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(
                    ' ',
                    widths[i] - cell.chars().count() + 2,
                ));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// An instant as RFC 3339 to the second, or `-`.
pub(crate) fn instant(at: Option<DateTime<Utc>>) -> String {
    at.map_or_else(
        || "-".to_owned(),
        |at| at.to_rfc3339_opts(SecondsFormat::Secs, true),
    )
}

/// A duration for people: `850ms`, `12s`, `3m 4s`, `2h 5m`, `3d 4h`.
pub(crate) fn span(delta: TimeDelta) -> String {
    let ms = delta.num_milliseconds().max(0);
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86_400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// `text` cut to `max` characters, with `…` when cut, on one line, [`printable`].
pub(crate) fn cut(text: &str, max: usize) -> String {
    let one_line = printable(&text.replace(['\n', '\r'], " "), false);
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// The names among `known` close to `name` (a typo, another case, a part), closest first.
pub(crate) fn near_names<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let wanted = name.to_lowercase();
    let mut near: Vec<(usize, String)> = known
        .into_iter()
        .filter_map(|candidate| {
            let lower = candidate.to_lowercase();
            let distance = edit_distance(&wanted, &lower);
            let close = distance <= (wanted.chars().count() / 3).max(2)
                || (wanted.len() >= 3 && lower.contains(&wanted))
                || (lower.len() >= 3 && wanted.contains(&lower));
            close.then(|| (distance, candidate.to_owned()))
        })
        .collect();
    near.sort();
    near.into_iter().take(5).map(|(_, name)| name).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            printable("a\x1b[2Jb\u{202e}c\u{7f}\td\ne", false),
            "a\\x1b[2Jb\\u{202e}c\\x7f\\x09d\\x0ae"
        );
        assert_eq!(
            printable("l1\tx\nl2\x07\r\n", true),
            "l1\tx\nl2\\x07\\x0d\n"
        );
        assert_eq!(printable("ünïcode ok", false), "ünïcode ok");
        assert_eq!(cut("why\x1b]0;pwned\x07", 100), "why\\x1b]0;pwned\\x07");
        let rows = vec![vec!["a\x1bb".to_owned(), "c".to_owned()]];
        assert_eq!(table(&["X", "Y"], &rows), "X       Y\na\\x1bb  c\n");
    }

    #[test]
    fn tables_align_and_trim() {
        let rows = vec![
            vec!["a".to_owned(), "longer".to_owned(), "x".to_owned()],
            vec!["bbbb".to_owned(), "-".to_owned(), "".to_owned()],
        ];
        assert_eq!(
            table(&["ONE", "TWO", "THREE"], &rows),
            "ONE   TWO     THREE\na     longer  x\nbbbb  -\n"
        );
    }

    #[test]
    fn near_names_find_typos_and_parts() {
        let known = ["syncAdvertiserReport", "sendInvoices", "cleanup"];
        assert_eq!(
            near_names("syncAdvertizerReport", known),
            ["syncAdvertiserReport"]
        );
        assert_eq!(near_names("invoice", known), ["sendInvoices"]);
        assert!(near_names("zzz", known).is_empty());
    }

    #[test]
    fn spans_read_like_people_write() {
        assert_eq!(span(TimeDelta::milliseconds(850)), "850ms");
        assert_eq!(span(TimeDelta::seconds(184)), "3m 4s");
        assert_eq!(span(TimeDelta::hours(50)), "2d 2h");
    }
}
