//! Reading a calendar's rules as written: dates and date spans, weekdays and day ranges, wall
//! times, weekly windows and ranges of time, each refused with a message that says how to
//! write it.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc, Weekday};
use chrono_tz::Tz;

use super::{CalendarError, RangeRule, WeeklyRule, Window, wall_to_instant};

fn parse_date(text: &str) -> Result<NaiveDate, CalendarError> {
    NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").map_err(|_| {
        CalendarError::new(format!(
            "date `{text}` is not a date; write YYYY-MM-DD, e.g. 2026-10-01"
        ))
    })
}

pub(super) fn parse_date_span(text: &str) -> Result<(NaiveDate, NaiveDate), CalendarError> {
    match text.split_once("..") {
        None => {
            let day = parse_date(text)?;
            Ok((day, day))
        }
        Some((first, last)) => {
            let (first, last) = (parse_date(first)?, parse_date(last)?);
            if last < first {
                return Err(CalendarError::new(format!(
                    "date span `{text}` ends before it starts; write the earlier date first"
                )));
            }
            Ok((first, last))
        }
    }
}

fn parse_weekday(text: &str) -> Option<Weekday> {
    let lower = text.trim().to_ascii_lowercase();
    let day = match lower.as_str() {
        "mon" | "monday" => Weekday::Mon,
        "tue" | "tuesday" => Weekday::Tue,
        "wed" | "wednesday" => Weekday::Wed,
        "thu" | "thursday" => Weekday::Thu,
        "fri" | "friday" => Weekday::Fri,
        "sat" | "saturday" => Weekday::Sat,
        "sun" | "sunday" => Weekday::Sun,
        _ => return None,
    };
    Some(day)
}

fn parse_days(items: &[String]) -> Result<[bool; 7], CalendarError> {
    if items.is_empty() {
        return Err(CalendarError::new(
            "weekly window has no `days`; write e.g. {\"days\": [\"sat\", \"sun\"]}",
        ));
    }
    let mut days = [false; 7];
    let mut insert = |day: Weekday| days[day.num_days_from_monday() as usize] = true;
    for item in items {
        let unknown = || {
            CalendarError::new(format!(
                "weekly window day `{item}` is not a day; write mon, tue, wed, thu, fri, sat, sun \
                 or a range such as mon-fri"
            ))
        };
        match item.split_once('-') {
            None => {
                insert(parse_weekday(item).ok_or_else(unknown)?);
            }
            Some((first, last)) => {
                let first = parse_weekday(first).ok_or_else(unknown)?;
                let last = parse_weekday(last).ok_or_else(unknown)?;
                let mut day = first;
                insert(day);
                while day != last {
                    day = day.succ();
                    insert(day);
                }
            }
        }
    }
    Ok(days)
}

/// `HH:MM` or `HH:MM:SS`; `24:00` (as `None`) only when `end_of_day_allowed`.
fn parse_time(
    text: &str,
    what: &str,
    end_of_day_allowed: bool,
) -> Result<Option<NaiveTime>, CalendarError> {
    let trimmed = text.trim();
    if end_of_day_allowed && matches!(trimmed, "24:00" | "24:00:00") {
        return Ok(None);
    }
    NaiveTime::parse_from_str(trimmed, "%H:%M:%S")
        .or_else(|_| NaiveTime::parse_from_str(trimmed, "%H:%M"))
        .ok()
        .map(Some)
        .ok_or_else(|| {
            CalendarError::new(format!(
                "weekly window `{what}` time `{text}` is not a time; write HH:MM or HH:MM:SS \
                 (00:00 to 23:59{})",
                if end_of_day_allowed { ", or 24:00" } else { "" }
            ))
        })
}

pub(super) fn parse_window(rule: &WeeklyRule) -> Result<Window, CalendarError> {
    let days = parse_days(&rule.days)?;
    let from = match &rule.from {
        Some(text) => parse_time(text, "from", false)?.unwrap_or(NaiveTime::MIN),
        None => NaiveTime::MIN,
    };
    let to = match &rule.to {
        Some(text) => parse_time(text, "to", true)?,
        None => None,
    };
    let wraps = to.is_some_and(|to| to <= from);
    if to == Some(from) {
        return Err(CalendarError::new(format!(
            "weekly window from `{}` to `{}` is empty; for whole days leave out `from` and `to`",
            rule.from.as_deref().unwrap_or("00:00"),
            rule.to.as_deref().unwrap_or("24:00"),
        )));
    }
    Ok(Window {
        days,
        from,
        to,
        wraps,
    })
}

pub(super) fn parse_range(
    rule: &RangeRule,
    zone: Tz,
) -> Result<(DateTime<Utc>, DateTime<Utc>), CalendarError> {
    let from = parse_range_end(&rule.from, "from", zone)?;
    let to = parse_range_end(&rule.to, "to", zone)?;
    if to <= from {
        return Err(CalendarError::new(format!(
            "range from `{}` to `{}` ends at or before it starts; write the earlier time as `from`",
            rule.from, rule.to
        )));
    }
    Ok((from, to))
}

fn parse_range_end(text: &str, what: &str, zone: Tz) -> Result<DateTime<Utc>, CalendarError> {
    let trimmed = text.trim();
    if let Ok(instant) = DateTime::parse_from_rfc3339(trimmed) {
        return Ok(instant.to_utc());
    }
    let wall = NaiveDateTime::parse_from_str(trimmed, "%Y-%m-%dT%H:%M:%S")
        .or_else(|_| NaiveDateTime::parse_from_str(trimmed, "%Y-%m-%dT%H:%M"))
        .or_else(|_| {
            NaiveDate::parse_from_str(trimmed, "%Y-%m-%d").map(|d| d.and_time(NaiveTime::MIN))
        });
    wall.ok()
        .and_then(|wall| wall_to_instant(wall, zone))
        .ok_or_else(|| {
            CalendarError::new(format!(
                "range `{what}` `{text}` is not a time; write YYYY-MM-DD, YYYY-MM-DDTHH:MM \
                 (wall clock in the task's zone) or an RFC 3339 instant such as \
                 2026-12-24T18:00:00Z"
            ))
        })
}
