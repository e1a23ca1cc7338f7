//! Telling libpq's keyword form (`host=db dbname=app`) from a URL, for the constructor that
//! picks a backend and for the PostgreSQL store that reads it (`postgres/conninfo.rs`). Depends
//! on nothing, so both can use it.

/// Whether `s` is libpq's keyword form (`host=... dbname=...`) rather than a URL.
pub(crate) fn is_keyword_form(s: &str) -> bool {
    let s = s.trim_start();
    !s.contains("://")
        && s.split(|c: char| c == '=' || c.is_whitespace())
            .next()
            .is_some_and(|key| KEYWORDS.contains(&key))
        && s.contains('=')
}

/// The keywords a keyword-form string may start with (libpq's, the ones people write first).
const KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "sslmode",
    "application_name",
    "target_session_attrs",
    "connect_timeout",
    "options",
];
