//! Our validation layer in front of croner: reads an expression field by field, refuses
//! everything crontab(5) would not accept (naming the field, the value and what is allowed),
//! applies Vixie cron's day rule, and writes a canonical, numbers-only pattern for croner.
//!
//! This module owns the grammar and the error messages; it must not know about time zones
//! or instants (that is `next.rs`).

use chrono::{Datelike, NaiveDate};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use super::error::{CronField, ScheduleError};

/// The `@` aliases we accept and the 5-field expression each stands for.
const ALIASES: &[(&str, &str)] = &[
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

const ALIAS_LIST: &str = "@hourly @daily @midnight @weekly @monthly @yearly @annually";

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// How a job treats daylight-saving transitions (see the module docs of `schedule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobKind {
    /// Neither the minute nor the hour field starts with `*`: the job belongs to wall-clock
    /// times of day.
    FixedTime,
    /// The minute or the hour field starts with `*`: the job runs on every real instant that
    /// matches.
    Interval,
}

/// A validated expression, ready for the search.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    pub(crate) cron: Cron,
    pub(crate) kind: JobKind,
    /// Seconds after which the wall-clock pattern repeats exactly, when that is a minute, an
    /// hour or a day: every field above the seconds (the minutes, the hours) matches every
    /// value, and every day matches (no restriction by day of month, month or day of week).
    pub(crate) period: Option<i64>,
}

/// What is wrong with one field, before the expression and field name are added.
struct FieldRefusal {
    value: String,
    problem: String,
    allowed: String,
}

impl FieldRefusal {
    fn new(
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
struct ParsedField {
    /// Bit `v` set when plain value `v` matches (day of week: 0-6, Sunday is 0).
    values: u64,
    /// `L`, `LW`, `15W`, `5#3`, `5L`, passed to croner as written here.
    specials: Vec<String>,
    /// The field is exactly `*`.
    is_star: bool,
    /// The field starts with `*` (Vixie: the day field counts as unrestricted; cronie: a
    /// minute or hour field makes the job an interval job).
    starts_with_star: bool,
    /// Day of week only: a leading `+` asks for AND with the day of month.
    force_and: bool,
}

impl CronField {
    fn min(self) -> u32 {
        match self {
            CronField::DayOfMonth | CronField::Month => 1,
            _ => 0,
        }
    }

    /// The largest value `*` and `N/S` run to (Saturday for the day of week).
    fn max(self) -> u32 {
        match self {
            CronField::Second | CronField::Minute => 59,
            CronField::Hour => 23,
            CronField::DayOfMonth => 31,
            CronField::Month => 12,
            CronField::DayOfWeek => 6,
        }
    }

    /// The largest value that may be written (7 is Sunday in the day of week).
    fn max_written(self) -> u32 {
        match self {
            CronField::DayOfWeek => 7,
            other => other.max(),
        }
    }

    fn allowed_values(self) -> String {
        match self {
            CronField::Month => "1-12 or JAN-DEC".to_owned(),
            CronField::DayOfWeek => "0-7 or SUN-SAT (0 and 7 are Sunday)".to_owned(),
            other => format!("{}-{}", other.min(), other.max()),
        }
    }

    /// Writes a value the way the user wrote values in this field: names if they used names.
    fn show(self, value: u32, names: bool) -> String {
        match self {
            CronField::Month if names => MONTH_NAMES[value as usize - 1].to_owned(),
            CronField::DayOfWeek if names => DAY_NAMES[(value % 7) as usize].to_owned(),
            _ => value.to_string(),
        }
    }
}

/// Validates `expression` and compiles it for the search.
pub(crate) fn compile(expression: &str) -> Result<Compiled, ScheduleError> {
    let trimmed = expression.trim();
    let expanded = if trimmed.starts_with('@') {
        expand_alias(expression, trimmed)?
    } else {
        trimmed
    };

    let parts: Vec<&str> = expanded.split_whitespace().collect();
    let texts: Vec<&str> = match parts.len() {
        // The 5-field form fires on second 0.
        5 => std::iter::once("0").chain(parts.iter().copied()).collect(),
        6 => parts,
        found => {
            let extra = if found == 7 {
                "; a year field is not supported"
            } else {
                ""
            };
            return Err(ScheduleError::expression(
                expression,
                None,
                format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with a \
                     leading second field, found {found}{extra}"
                ),
            ));
        }
    };

    let mut parsed = Vec::with_capacity(6);
    for (field, text) in CronField::ALL.iter().zip(&texts) {
        let one = parse_field(*field, text).map_err(|refusal| {
            ScheduleError::expression(
                expression,
                Some(*field),
                format!(
                    "{field} field value `{}` {}; allowed {}",
                    refusal.value, refusal.problem, refusal.allowed
                ),
            )
        })?;
        parsed.push(one);
    }

    // cronie's rule (its MIN_STAR and HR_STAR flags): the form of the minute and hour fields
    // decides, not the values they expand to, and the seconds field plays no part.
    let (minute, hour) = (&parsed[1], &parsed[2]);
    let kind = if minute.starts_with_star || hour.starts_with_star {
        JobKind::Interval
    } else {
        JobKind::FixedTime
    };

    let pattern = croner_pattern(&parsed);
    let cron = CronParser::builder()
        .seconds(Seconds::Required)
        .year(Year::Disallowed)
        .build()
        .parse(&pattern)
        .map_err(|error| {
            // Every pattern we write is one croner accepts; reaching this is our bug.
            ScheduleError::expression(
                expression,
                None,
                format!(
                    "internal error: croner refused the normalized pattern `{pattern}`: {error}"
                ),
            )
        })?;

    if !fires_ever(&cron) {
        let (dom, month, dow) = (texts[3], texts[4], texts[5]);
        let dow_restricts = !parsed[5].is_star;
        let message = if dow_restricts {
            format!(
                "day-of-week field value `{dow}` never falls on day-of-month `{dom}` in month \
                 `{month}`, so the schedule would never fire; allowed a combination that occurs \
                 on some date"
            )
        } else {
            format!(
                "day-of-month field value `{dom}` never occurs in month `{month}`, so the schedule \
                 would never fire; allowed a day that exists in one of the months (29 February \
                 is fine: it fires in leap years)"
            )
        };
        let field = if dow_restricts {
            CronField::DayOfWeek
        } else {
            CronField::DayOfMonth
        };
        return Err(ScheduleError::expression(expression, Some(field), message));
    }

    let period = wall_period(&parsed);
    Ok(Compiled { cron, kind, period })
}

/// The period of the wall-clock pattern of `fields` (second .. day of week), if it is a
/// minute, an hour or a day. Judged on the values each field matches, so it holds whichever
/// day rule applies: when every day of the month, every month and every day of the week match,
/// every date matches.
fn wall_period(fields: &[ParsedField]) -> Option<i64> {
    let full = |index: usize| {
        let field = CronField::ALL[index];
        let field_values = &fields[index];
        field_values.specials.is_empty()
            && (field.min()..=field.max()).all(|v| field_values.values & (1u64 << v) != 0)
    };
    if !(full(3) && full(4) && full(5)) {
        return None;
    }
    Some(match (full(1), full(2)) {
        (true, true) => 60,
        (_, true) => 3_600,
        _ => 86_400,
    })
}

fn expand_alias(expression: &str, trimmed: &str) -> Result<&'static str, ScheduleError> {
    let lower = trimmed.to_ascii_lowercase();
    if let Some((_, expansion)) = ALIASES.iter().find(|(alias, _)| *alias == lower) {
        return Ok(expansion);
    }
    let problem = if lower == "@reboot" {
        format!(
            "`@reboot` is not a schedule (tasks run on their clock, not at start-up); allowed {ALIAS_LIST}"
        )
    } else {
        format!("unknown alias `{trimmed}`; allowed {ALIAS_LIST}")
    };
    Err(ScheduleError::expression(expression, None, problem))
}

/// Writes the six fields as croner reads them: explicit numbers, `*` only where the user
/// wrote exactly `*`, and `+` on the day of week whenever Vixie cron ANDs the day fields.
fn croner_pattern(fields: &[ParsedField]) -> String {
    let mut out = String::with_capacity(64);
    for (index, field) in fields.iter().enumerate() {
        if index > 0 {
            out.push(' ');
        }
        if index == 5 && !field.is_star {
            let dom = &fields[3];
            let vixie_and = (dom.starts_with_star && !dom.is_star)
                || (field.starts_with_star && !field.is_star);
            if field.force_and || vixie_and {
                out.push('+');
            }
        }
        if field.is_star {
            out.push('*');
            continue;
        }
        let mut first = true;
        for value in 0..64 {
            if field.values & (1 << value) != 0 {
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(&value.to_string());
            }
        }
        for special in &field.specials {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(special);
        }
    }
    out
}

/// Whether some date matches the day-of-month, month and day-of-week fields.
///
/// 2000-2027 holds every calendar a month can have (each of the 14 year types, leap years
/// starting on every weekday, a 400-year leap day), so a pattern that matches no day in it
/// never matches any day.
fn fires_ever(cron: &Cron) -> bool {
    let mut date = NaiveDate::from_ymd_opt(2000, 1, 1).expect("valid date");
    let end = NaiveDate::from_ymd_opt(2028, 1, 1).expect("valid date");
    // 2000-01-01 was a Saturday.
    let mut weekday = croner::Weekday::Saturday;
    while date < end {
        let matches = cron.pattern.month_match(date.month()).unwrap_or(false)
            && cron
                .pattern
                .day_match(date.year(), date.month(), date.day(), weekday)
                .unwrap_or(false);
        if matches {
            return true;
        }
        date = date.succ_opt().expect("in range");
        weekday = weekday.shift(1);
    }
    false
}

fn parse_field(field: CronField, text: &str) -> Result<ParsedField, FieldRefusal> {
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
