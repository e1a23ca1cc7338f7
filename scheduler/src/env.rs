//! The one reader of the environment contract: every `SCHEDULER_*` variable (named in
//! [`crate::vars`]) is read here (through a lookup, so tests need no process environment), and
//! every invalid value becomes one kind of error, [`InvalidSetting`], naming the variable and
//! saying what to write instead (the crate's [`Error::InvalidSetting`](crate::Error::InvalidSetting)
//! at the boundary).
//!
//! This module only turns strings into values; what the values mean belongs to the modules that
//! use them ([`SchedulerBuilder::from_env`](crate::SchedulerBuilder::from_env),
//! [`ConfigSettings::from_lookup`](crate::config::ConfigSettings::from_lookup), the webhook's
//! settings, the command line). It names nothing above the schedule words, so every layer may
//! read the environment through it.

use std::borrow::Cow;
use std::str::FromStr;
use std::time::Duration;

use chrono_tz::Tz;

/// An invalid value of an environment variable (or of a builder setting): which, what is wrong
/// and what to write instead. It becomes [`Error::InvalidSetting`](crate::Error::InvalidSetting).
#[derive(Debug, thiserror::Error)]
#[error("invalid setting `{name}`: {message}")]
pub(crate) struct InvalidSetting {
    pub(crate) name: Cow<'static, str>,
    pub(crate) message: String,
}

type Result<T, E = InvalidSetting> = std::result::Result<T, E>;

/// Reads variables through a lookup; unset and blank are the same.
pub(crate) struct Env<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

/// The process environment.
pub(crate) fn process(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// An invalid value of `name`.
pub(crate) fn invalid(
    name: impl Into<Cow<'static, str>>,
    message: impl Into<String>,
) -> InvalidSetting {
    InvalidSetting {
        name: name.into(),
        message: message.into(),
    }
}

impl<'a> Env<'a> {
    pub(crate) fn new(lookup: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self { lookup }
    }

    /// The trimmed value, if set and not blank.
    pub(crate) fn string(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// A duration in `range` (`docs/limits.md`); the error names the variable and the range.
    pub(crate) fn duration_in(
        &self,
        name: &'static str,
        range: crate::bounds::DurationRange,
    ) -> Result<Option<Duration>> {
        self.string(name)
            .map(|v| {
                range.parse(name, &v).map_err(|e| InvalidSetting {
                    name: e.field,
                    message: e.problem,
                })
            })
            .transpose()
    }

    /// A whole number in `range` (`docs/limits.md`); the error names the variable and the
    /// range.
    pub(crate) fn count_in<T>(
        &self,
        name: &'static str,
        range: crate::bounds::CountRange,
    ) -> Result<Option<T>>
    where
        T: FromStr + Copy + TryInto<u64> + std::fmt::Display,
    {
        self.string(name)
            .map(|v| {
                let n: T = v.parse().map_err(|_| {
                    invalid(
                        name,
                        format!(
                            "`{}` is not a whole number; accepted: {range}",
                            crate::bounds::printable(&v)
                        ),
                    )
                })?;
                range.check(name, n).map_err(|e| InvalidSetting {
                    name: e.field,
                    message: e.problem,
                })
            })
            .transpose()
    }

    /// A whole number. Prefer [`count_in`](Self::count_in), with the value's range.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub(crate) fn number<T: FromStr>(&self, name: &'static str) -> Result<Option<T>> {
        self.string(name)
            .map(|v| {
                v.parse()
                    .map_err(|_| invalid(name, format!("`{v}` is not a whole number in range")))
            })
            .transpose()
    }

    /// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
    pub(crate) fn boolean(&self, name: &'static str) -> Result<Option<bool>> {
        self.string(name)
            .map(|v| match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(invalid(
                    name,
                    format!("`{v}` is not a boolean; write `true` or `false`"),
                )),
            })
            .transpose()
    }

    /// An IANA time zone.
    pub(crate) fn timezone(&self, name: &'static str) -> Result<Option<Tz>> {
        self.string(name)
            .map(|v| crate::schedule::parse_timezone(&v).map_err(|e| invalid(name, e.to_string())))
            .transpose()
    }

    /// A socket address such as `127.0.0.1:9870` or `[::1]:9870` (a listening address).
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub(crate) fn socket_addr(&self, name: &'static str) -> Result<Option<std::net::SocketAddr>> {
        self.string(name)
            .map(|v| {
                v.parse().map_err(|_| {
                    invalid(
                        name,
                        format!("`{v}` is not an address to listen on; write it like `127.0.0.1:9870` or `0.0.0.0:9870`"),
                    )
                })
            })
            .transpose()
    }

    /// A value parsed by its own `FromStr` (policies), whose error says what is allowed.
    pub(crate) fn parsed<T>(&self, name: &'static str) -> Result<Option<T>>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        self.string(name)
            .map(|v| v.parse().map_err(|e: T::Err| invalid(name, e.to_string())))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn blank_is_unset_and_values_are_trimmed() {
        let lookup = env(&[("A", "  "), ("B", " 2s ")]);
        let e = Env::new(&lookup);
        assert_eq!(e.string("A"), None);
        assert_eq!(
            e.duration_in("B", crate::bounds::TASK_TIMEOUT).unwrap(),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            e.duration_in("C", crate::bounds::TASK_TIMEOUT).unwrap(),
            None
        );
    }

    #[test]
    fn every_refusal_names_the_variable_and_the_fix() {
        let lookup = env(&[
            ("D", "soon"),
            ("Z", "0s"),
            ("N", "-3"),
            ("F", "maybe"),
            ("T", "Mars/Olympus"),
        ]);
        let e = Env::new(&lookup);
        let msg = |r: Result<()>| r.unwrap_err().to_string();
        assert!(
            msg(e.duration_in("D", crate::bounds::TASK_TIMEOUT).map(drop))
                .starts_with("invalid setting `D`: `soon` is not a duration")
        );
        assert!(
            msg(e.duration_in("Z", crate::bounds::TASK_TIMEOUT).map(drop))
                .contains("0s is out of range")
        );
        assert!(msg(e.number::<u32>("N").map(drop)).contains("`-3` is not a whole number"));
        assert!(msg(e.boolean("F").map(drop)).contains("write `true` or `false`"));
        assert!(msg(e.timezone("T").map(drop)).contains("unknown time zone `Mars/Olympus`"));
    }

    #[test]
    fn ranged_values_name_the_variable_and_the_range() {
        let vars = env(&[
            ("SCHEDULER_LOCK_LIFETIME", "300000years"),
            ("SCHEDULER_MAX_CONCURRENT", "0"),
            ("SCHEDULER_POLL_INTERVAL", " 2s "),
            ("SCHEDULER_MAX_CONNECTIONS", "many"),
        ]);
        let env = Env::new(&vars);
        let e = env
            .duration_in("SCHEDULER_LOCK_LIFETIME", crate::bounds::LOCK_LIFETIME)
            .unwrap_err();
        assert_eq!(e.name, "SCHEDULER_LOCK_LIFETIME");
        assert!(e.message.contains("from 300ms to 1day"), "{e}");
        let e = env
            .count_in::<usize>("SCHEDULER_MAX_CONCURRENT", crate::bounds::MAX_CONCURRENT)
            .unwrap_err();
        assert!(e.to_string().contains("from 1 to 1000000"), "{e}");
        let e = env
            .count_in::<u32>("SCHEDULER_MAX_CONNECTIONS", crate::bounds::MAX_CONNECTIONS)
            .unwrap_err();
        assert!(e.to_string().contains("not a whole number"), "{e}");
        assert_eq!(
            env.duration_in("SCHEDULER_POLL_INTERVAL", crate::bounds::POLL_INTERVAL)
                .unwrap(),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            env.duration_in("UNSET", crate::bounds::POLL_INTERVAL)
                .unwrap(),
            None
        );
    }

    #[test]
    fn listening_addresses() {
        let lookup = env(&[
            ("A", "127.0.0.1:9870"),
            ("B", "localhost"),
            ("C", "[::1]:0"),
        ]);
        let e = Env::new(&lookup);
        assert_eq!(
            e.socket_addr("A").unwrap(),
            Some("127.0.0.1:9870".parse().unwrap())
        );
        assert!(e.socket_addr("C").unwrap().unwrap().ip().is_loopback());
        let error = e.socket_addr("B").unwrap_err().to_string();
        assert!(error.contains("write it like `127.0.0.1:9870`"), "{error}");
    }
}
