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

mod field;
use field::{ParsedField, parse_field};

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
