//! One field of a cron expression read and checked: its values, steps, ranges and names, and
//! the specials (`L`, `W`, `#`) passed to croner as written; a refusal names the value, what is
//! wrong with it and what the field allows.

use super::{DAY_NAMES, MONTH_NAMES};
use crate::schedule::error::CronField;

/// What is wrong with one field, before the expression and field name are added.
pub(super) struct FieldRefusal {
    pub(super) value: String,
    pub(super) problem: String,
    pub(super) allowed: String,
}

impl FieldRefusal {
    pub(super) fn new(
        value: impl Into<String>,
        problem: impl Into<String>,
        allowed: impl Into<String>,
    ) -> Self {
        Self {
            value: value.into(),
            problem: problem.into(),
            allowed: allowed.into(),
        }
    }
}

/// One field after parsing.
#[derive(Debug, Default)]
pub(super) struct ParsedField {
    /// Bit `v` set when plain value `v` matches (day of week: 0-6, Sunday is 0).
    pub(super) values: u64,
    /// `L`, `LW`, `15W`, `5#3`, `5L`, passed to croner as written here.
    pub(super) specials: Vec<String>,
    /// The field is exactly `*`.
    pub(super) is_star: bool,
    /// The field starts with `*` (Vixie: the day field counts as unrestricted; cronie: a
    /// minute or hour field makes the job an interval job).
    pub(super) starts_with_star: bool,
    /// Day of week only: a leading `+` asks for AND with the day of month.
    pub(super) force_and: bool,
}

impl CronField {
    pub(super) fn min(self) -> u32 {
        match self {
            CronField::DayOfMonth | CronField::Month => 1,
            _ => 0,
        }
    }

    /// The largest value `*` and `N/S` run to (Saturday for the day of week).
    pub(super) fn max(self) -> u32 {
        match self {
            CronField::Second | CronField::Minute => 59,
            CronField::Hour => 23,
            CronField::DayOfMonth => 31,
            CronField::Month => 12,
            CronField::DayOfWeek => 6,
        }
    }

    /// The largest value that may be written (7 is Sunday in the day of week).
    pub(super) fn max_written(self) -> u32 {
        match self {
            CronField::DayOfWeek => 7,
            other => other.max(),
        }
    }

    pub(super) fn allowed_values(self) -> String {
        match self {
            CronField::Month => "1-12 or JAN-DEC".to_owned(),
            CronField::DayOfWeek => "0-7 or SUN-SAT (0 and 7 are Sunday)".to_owned(),
            other => format!("{}-{}", other.min(), other.max()),
        }
    }

    /// Writes a value the way the user wrote values in this field: names if they used names.
    pub(super) fn show(self, value: u32, names: bool) -> String {
        match self {
            CronField::Month if names => MONTH_NAMES[value as usize - 1].to_owned(),
            CronField::DayOfWeek if names => DAY_NAMES[(value % 7) as usize].to_owned(),
            _ => value.to_string(),
        }
    }
}

pub(super) fn parse_field(field: CronField, text: &str) -> Result<ParsedField, FieldRefusal> {
    let mut parsed = ParsedField::default();
    let mut body = text;
    if field == CronField::DayOfWeek
        && let Some(rest) = body.strip_prefix('+')
    {
        parsed.force_and = true;
        body = rest;
        if body.is_empty() {
            return Err(FieldRefusal::new(
                text,
                "has `+` without days",
                "`+` followed by days, such as `+FRI`",
            ));
        }
    } else if body.contains('+') {
        return Err(FieldRefusal::new(
            text,
            "has a `+` here",
            "`+` only at the start of the day-of-week field",
        ));
    }
    parsed.is_star = body == "*";
    parsed.starts_with_star = body.starts_with('*');

    for item in body.split(',') {
        if item.is_empty() {
            return Err(FieldRefusal::new(
                text,
                "has an empty list item",
                "a comma-separated list without empty items, such as `1,15`",
            ));
        }
        parse_item(field, item, &mut parsed)?;
    }
    Ok(parsed)
}

fn parse_item(field: CronField, item: &str, parsed: &mut ParsedField) -> Result<(), FieldRefusal> {
    if item.contains('?') {
        return Err(FieldRefusal::new(item, "uses `?`", "`*` for any value"));
    }
    if let Some(special) = parse_special(field, item)? {
        parsed.specials.push(special);
        return Ok(());
    }

    let (base, step) = match item.split_once('/') {
        None => (item, None),
        Some((base, step)) => {
            if base.is_empty() {
                return Err(FieldRefusal::new(
                    item,
                    "has a step without a start",
                    format!("`*/{step}` or a start such as `{}/{step}`", field.min()),
                ));
            }
            let span = field.max() - field.min();
            let allowed_steps = format!("steps 1-{span}");
            if step.is_empty() {
                return Err(FieldRefusal::new(
                    item,
                    "is missing its step",
                    allowed_steps,
                ));
            }
            if !step.bytes().all(|b| b.is_ascii_digit()) {
                return Err(FieldRefusal::new(
                    item,
                    "has a step that is not a number",
                    allowed_steps,
                ));
            }
            let step_value: u32 = step.parse().unwrap_or(u32::MAX);
            if step_value == 0 {
                return Err(FieldRefusal::new(item, "has step 0", allowed_steps));
            }
            if step_value > span {
                return Err(FieldRefusal::new(
                    item,
                    format!("has step `{step}`, larger than the field's range"),
                    allowed_steps,
                ));
            }
            (base, Some(step_value))
        }
    };

    let (start, end) = if base == "*" {
        (field.min(), field.max())
    } else if let Some((low, high)) = base.split_once('-') {
        let uses_names = low.bytes().any(|b| b.is_ascii_alphabetic());
        let mut start = parse_value(field, low)?;
        let mut end = parse_value(field, high)?;
        if field == CronField::DayOfWeek {
            // 7 is Sunday; as the end of a range it is the crontab idiom `FRI-SUN` (5,6,0).
            if start == 7 {
                start = 0;
                if end == 7 {
                    end = 0;
                }
            }
            if end == 0 && start > 0 {
                end = 7;
            }
        }
        if start > end {
            let suffix = step.map(|s| format!("/{s}")).unwrap_or_default();
            let piece = |a: u32, b: u32| {
                if a == b {
                    field.show(a, uses_names)
                } else {
                    format!(
                        "{}-{}{suffix}",
                        field.show(a, uses_names),
                        field.show(b, uses_names)
                    )
                }
            };
            let hint = format!("{},{}", piece(start, field.max()), piece(field.min(), end));
            return Err(FieldRefusal::new(
                item,
                "is a reversed range",
                format!("ranges from low to high; write `{hint}` to wrap around"),
            ));
        }
        (start, end)
    } else {
        let value = parse_value(field, base)?;
        match step {
            // `N/S` means `N-max/S`.
            Some(_) => (value, field.max().max(value)),
            None => (value, value),
        }
    };

    let step = step.unwrap_or(1) as usize;
    for value in (start..=end).step_by(step) {
        let value = if field == CronField::DayOfWeek {
            value % 7
        } else {
            value
        };
        parsed.values |= 1 << value;
    }
    Ok(())
}

/// `L`, `LW`, `15W` in the day of month; `5#3`, `FRI#3`, `5L`, `FRIL` in the day of week.
fn parse_special(field: CronField, item: &str) -> Result<Option<String>, FieldRefusal> {
    let upper = item.to_ascii_uppercase();
    if MONTH_NAMES.contains(&upper.as_str()) || DAY_NAMES.contains(&upper.as_str()) {
        // A name, maybe in the wrong field: `parse_value` says which.
        return Ok(None);
    }
    match field {
        CronField::DayOfMonth => {
            if upper == "L" || upper == "LW" {
                return Ok(Some(upper));
            }
            if let Some(day) = upper.strip_suffix('W')
                && !day.is_empty()
                && day.bytes().all(|b| b.is_ascii_digit())
            {
                let value = parse_value(field, day)?;
                return Ok(Some(format!("{value}W")));
            }
            if upper.contains('L') || upper.contains('W') || upper.contains('#') {
                return Err(FieldRefusal::new(
                    item,
                    "is not a day-of-month form we know",
                    "1-31, `L` (last day), `LW` (last weekday) or `<day>W` (nearest weekday)",
                ));
            }
            Ok(None)
        }
        CronField::DayOfWeek => {
            if let Some((day, nth)) = upper.split_once('#') {
                let day = parse_value(field, day)? % 7;
                let nth_ok = nth.len() == 1 && matches!(nth.as_bytes()[0], b'1'..=b'5');
                if !nth_ok {
                    return Err(FieldRefusal::new(
                        item,
                        "has an occurrence after `#` out of range",
                        "`<day>#1` to `<day>#5`",
                    ));
                }
                return Ok(Some(format!("{day}#{nth}")));
            }
            if upper == "L" {
                return Err(FieldRefusal::new(
                    item,
                    "is `L` without a day",
                    "`<day>L` for the last such weekday of the month, such as `FRIL` or `5L`",
                ));
            }
            if let Some(day) = upper.strip_suffix('L')
                && !day.contains(['-', '/', '*', 'L'])
            {
                let day = parse_value(field, day)? % 7;
                return Ok(Some(format!("{day}L")));
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// One number or three-letter name, checked against the field.
fn parse_value(field: CronField, token: &str) -> Result<u32, FieldRefusal> {
    let allowed = field.allowed_values();
    if token.is_empty() {
        return Err(FieldRefusal::new(token, "is missing a number", allowed));
    }
    if token.bytes().all(|b| b.is_ascii_digit()) {
        let value: u32 = token.parse().unwrap_or(u32::MAX);
        if value < field.min() || value > field.max_written() {
            return Err(FieldRefusal::new(token, "is out of range", allowed));
        }
        return Ok(value);
    }
    let upper = token.to_ascii_uppercase();
    let month = MONTH_NAMES.iter().position(|name| *name == upper);
    let day = DAY_NAMES.iter().position(|name| *name == upper);
    match (field, month, day) {
        (CronField::Month, Some(index), _) => Ok(index as u32 + 1),
        (CronField::DayOfWeek, _, Some(index)) => Ok(index as u32),
        (_, Some(_), _) => Err(FieldRefusal::new(token, "is a month name", allowed)),
        (_, _, Some(_)) => Err(FieldRefusal::new(token, "is a day name", allowed)),
        (CronField::Month | CronField::DayOfWeek, _, _) => Err(FieldRefusal::new(
            token,
            "is not a number or a three-letter name",
            allowed,
        )),
        _ => Err(FieldRefusal::new(token, "is not a number", allowed)),
    }
}
