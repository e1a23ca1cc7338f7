//! Cron in words, for people reading the admin API and the dashboard.
//!
//! Common shapes read naturally ("every 5 minutes", "at 02:30 every day", "at minute 0 past
//! every hour on Monday through Friday"); anything else falls back to naming each restricted
//! field, so the text is never wrong, only plainer. The expression is not validated here (that is
//! [`ScheduleSpec::parse`](super::ScheduleSpec::parse)'s job): describe what parsed.

const DAYS: [&str; 8] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];

/// A cron expression (5 or 6 fields, or an `@` alias) in English.
///
/// ```
/// use scheduler::schedule::describe;
///
/// assert_eq!(describe("*/5 * * * *"), "every 5 minutes");
/// assert_eq!(describe("30 2 * * *"), "at 02:30 every day");
/// assert_eq!(describe("* * * * * *"), "every second");
/// assert_eq!(describe("0 * * * MON-FRI"), "at minute 0 past every hour on Monday through Friday");
/// assert_eq!(describe("0 9 1 * *"), "at 09:00 on day 1 of the month");
/// ```
pub fn describe(expression: &str) -> String {
    let expression = expression.trim();
    match expression.to_ascii_lowercase().as_str() {
        "@hourly" => return "at minute 0 past every hour".into(),
        "@daily" | "@midnight" => return "at 00:00 every day".into(),
        "@weekly" => return "at 00:00 on Sunday".into(),
        "@monthly" => return "at 00:00 on day 1 of the month".into(),
        "@yearly" | "@annually" => return "at 00:00 on day 1 of the month in January".into(),
        _ => {}
    }
    let fields: Vec<&str> = expression.split_whitespace().collect();
    let (second, rest) = match fields.len() {
        5 => (None, &fields[..]),
        6 => (Some(fields[0]), &fields[1..]),
        _ => return format!("cron `{expression}`"),
    };
    let (minute, hour, dom, month, dow) = (rest[0], rest[1], rest[2], rest[3], rest[4]);
    let second = second.filter(|s| *s != "0");
    let (time, fixed) = time_of_day(second, minute, hour);
    let mut out = time;
    let days = days(dom, dow);
    let months = months(month);
    match (&days, &months) {
        (None, None) if fixed => out.push_str(" every day"),
        _ => {}
    }
    for part in [days, months].into_iter().flatten() {
        out.push(' ');
        out.push_str(&part);
    }
    out
}

fn number(field: &str) -> Option<u32> {
    field.parse().ok()
}

/// `*/N` as N.
fn every(field: &str) -> Option<u32> {
    field.strip_prefix("*/").and_then(number)
}

fn plural(n: u32, unit: &str) -> String {
    if n == 1 {
        format!("every {unit}")
    } else {
        format!("every {n} {unit}s")
    }
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The time part, and whether it names fixed times of day.
fn time_of_day(second: Option<&str>, minute: &str, hour: &str) -> (String, bool) {
    if let (Some(m), Some(h)) = (number(minute), number(hour)) {
        return match second.map(|s| (s, number(s))) {
            None => (format!("at {h:02}:{m:02}"), true),
            Some((_, Some(s))) => (format!("at {h:02}:{m:02}:{s:02}"), true),
            Some((s, None)) => (format!("at second {s} of {h:02}:{m:02}"), true),
        };
    }
    let seconds = match second {
        Some("*") if minute == "*" && hour == "*" => return ("every second".into(), false),
        Some(s) => match every(s) {
            Some(n) if minute == "*" && hour == "*" => return (plural(n, "second"), false),
            _ => Some(s),
        },
        None => None,
    };
    let mut out = match (minute, number(minute), every(minute)) {
        ("*", _, _) if hour == "*" => "every minute".to_owned(),
        (_, _, Some(n)) if hour == "*" => plural(n, "minute"),
        ("*", _, _) => "every minute".to_owned(),
        (_, _, Some(n)) => plural(n, "minute"),
        (_, Some(m), _) => format!("at minute {m}"),
        (m, _, _) => format!("at minutes {m}"),
    };
    let hours = match (hour, every(hour)) {
        ("*", _) => {
            if number(minute).is_some() || !minute.starts_with('*') {
                Some(" past every hour".to_owned())
            } else {
                None
            }
        }
        (_, Some(1)) => Some(" past every hour".to_owned()),
        (_, Some(n)) => Some(format!(" past every {} hour", ordinal(n))),
        (h, None) => Some(match number(h) {
            Some(h) => format!(" past hour {h}"),
            None => format!(" past hours {h}"),
        }),
    };
    if let Some(hours) = hours {
        out.push_str(&hours);
    }
    if let Some(s) = seconds {
        out = format!("at second {s}, {out}");
    }
    (out, false)
}

/// A day-of-week field in words (`None` when it is not simple).
fn weekday(field: &str) -> Option<String> {
    let day = |s: &str| -> Option<&'static str> {
        let upper = s.to_ascii_uppercase();
        let i = match number(s) {
            Some(n) if n <= 7 => n as usize,
            Some(_) => return None,
            None => DAY_NAMES.iter().position(|d| *d == upper)?,
        };
        Some(DAYS[i])
    };
    list(field, day)
}

fn month_name(s: &str) -> Option<&'static str> {
    let upper = s.to_ascii_uppercase();
    match number(s) {
        Some(n @ 1..=12) => Some(MONTHS[n as usize - 1]),
        Some(_) => None,
        None => MONTH_NAMES
            .iter()
            .position(|m| *m == upper)
            .map(|i| MONTHS[i]),
    }
}

/// A list of values and ranges (`MON-FRI`, `1,3,5`), each item named by `name`.
fn list(field: &str, name: impl Fn(&str) -> Option<&'static str>) -> Option<String> {
    let mut items = Vec::new();
    for item in field.split(',') {
        match item.split_once('-') {
            Some((a, b)) => items.push(format!("{} through {}", name(a)?, name(b)?)),
            None => items.push(name(item)?.to_owned()),
        }
    }
    Some(join(&items))
}

fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn days(dom: &str, dow: &str) -> Option<String> {
    let dom_part = match dom {
        "*" => None,
        "L" | "l" => Some("on the last day of the month".to_owned()),
        d => Some(match number(d) {
            Some(d) => format!("on day {d} of the month"),
            None => format!("on days {d} of the month"),
        }),
    };
    let dow_part = match dow {
        "*" => None,
        d => Some(match weekday(d) {
            Some(words) => format!("on {words}"),
            None => format!("on day-of-week `{d}`"),
        }),
    };
    match (dom_part, dow_part) {
        (None, None) => None,
        (Some(a), None) | (None, Some(a)) => Some(a),
        // Vixie cron: both restricted means either matches (a leading `+` asks for both).
        (Some(a), Some(b)) if dow.starts_with('+') => Some(format!("{a} if also {b}")),
        (Some(a), Some(b)) => Some(format!("{a} and {b}")),
    }
}

fn months(month: &str) -> Option<String> {
    match month {
        "*" => None,
        m => Some(match list(m, month_name) {
            Some(words) => format!("in {words}"),
            None => format!("in months `{m}`"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn common_shapes_read_naturally() {
        for (expr, words) in [
            ("* * * * *", "every minute"),
            ("* * * * * *", "every second"),
            ("*/10 * * * * *", "every 10 seconds"),
            ("*/5 * * * *", "every 5 minutes"),
            ("0 */5 * * * *", "every 5 minutes"),
            ("*/1 * * * *", "every minute"),
            ("0 * * * *", "at minute 0 past every hour"),
            ("15 */2 * * *", "at minute 15 past every 2nd hour"),
            ("30 2 * * *", "at 02:30 every day"),
            ("0 30 2 * * *", "at 02:30 every day"),
            ("15 30 2 * * *", "at 02:30:15 every day"),
            ("0 9 * * MON-FRI", "at 09:00 on Monday through Friday"),
            ("0 9 * * 1-5", "at 09:00 on Monday through Friday"),
            (
                "0 * * * MON-FRI",
                "at minute 0 past every hour on Monday through Friday",
            ),
            ("0 0 * * 0,6", "at 00:00 on Sunday and Saturday"),
            ("0 0 * * 7", "at 00:00 on Sunday"),
            ("0 9 1 * *", "at 09:00 on day 1 of the month"),
            ("0 0 L * *", "at 00:00 on the last day of the month"),
            ("0 0 1 1 *", "at 00:00 on day 1 of the month in January"),
            ("0 0 * JAN-MAR *", "at 00:00 in January through March"),
            ("@hourly", "at minute 0 past every hour"),
            ("@daily", "at 00:00 every day"),
            ("*/20 1 * * *", "every 20 minutes past hour 1"),
            ("0 9,17 * * *", "at minute 0 past hours 9,17"),
        ] {
            assert_eq!(describe(expr), words, "{expr}");
        }
    }

    #[test]
    fn unusual_shapes_fall_back_to_the_fields() {
        assert_eq!(describe("0 0 * * 5L"), "at 00:00 on day-of-week `5L`");
        assert_eq!(
            describe("0 0 13 * +5"),
            "at 00:00 on day 13 of the month if also on Friday"
        );
        assert_eq!(describe("not cron"), "cron `not cron`");
    }
}
