//! A user's text quoted in an error message, made safe to print.

/// `text` with control characters shown as escapes and cut to 80 characters, for an error
/// message that quotes what a user wrote (a terminal never receives a raw escape sequence).
pub(crate) fn printable(text: &str) -> String {
    printable_up_to(text, 80)
}

/// [`printable`], cut to `max` characters (`usize::MAX`: not cut).
pub(crate) fn printable_up_to(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}
