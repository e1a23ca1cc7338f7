//! What a `postgres://` URL asks for, read before sqlx sees it. The URL here names one host: a
//! host list, the keyword form and the parameters that choose a server were read before, in
//! `conninfo.rs`.
//!
//! sqlx logs every query parameter it does not know **with its value** ("ignoring unrecognized
//! connect parameter key=sslpassword value=..."), so a secret in such a parameter would reach the
//! log. Here the query is split three ways: parameters sqlx handles as libpq does stay in the URL
//! handed to sqlx; the TLS parameters and the scheduler's own (`pgbouncer`) are taken out and
//! applied by the store (libpq's TLS rules are in `tls.rs`); every other parameter is dropped
//! and named in a warning, never with its value. This module parses for connecting; it does not
//! log and owns no redaction (that is `crate::redact`).

use super::tls::TlsParams;
use crate::store::{StoreError, StoreResult};

/// Parameters sqlx reads as libpq does, handed on unchanged.
const SQLX_PARAMETERS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
    "statement-cache-capacity",
];

/// A database URL taken apart.
#[derive(Debug)]
pub(super) struct DatabaseUrl {
    /// The URL with only the parameters of [`SQLX_PARAMETERS`] (and `options[...]`).
    pub(super) for_sqlx: url::Url,
    /// `sslmode`, `sslrootcert`, `sslcert`, `sslkey` as written in the URL.
    pub(super) tls: TlsParams,
    /// `pgbouncer=true`: the server is reached through a transaction-mode pooler.
    pub(super) pgbouncer: Option<bool>,
    /// Names of the parameters dropped (their values are never kept).
    pub(super) ignored: Vec<String>,
}

impl DatabaseUrl {
    /// Takes `url` apart. The error never quotes the URL (the caller names it, redacted).
    pub(super) fn parse(url: &str) -> StoreResult<DatabaseUrl> {
        let mut parsed = url::Url::parse(url)
            .map_err(|e| StoreError::setup(format!("it cannot be parsed as a URL: {e}")))?;
        let mut kept = Vec::new();
        let mut tls = TlsParams::default();
        let mut pgbouncer = None;
        let mut ignored = Vec::new();
        for (key, value) in parsed.query_pairs() {
            let value = value.into_owned();
            match &*key {
                "sslmode" | "ssl-mode" => tls.mode = Some(value),
                "sslrootcert" | "ssl-root-cert" | "ssl-ca" => tls.root_cert = Some(value),
                "sslcert" | "ssl-cert" => tls.cert = Some(value),
                "sslkey" | "ssl-key" => tls.key = Some(value),
                "pgbouncer" => {
                    pgbouncer = Some(parse_bool(&value).ok_or_else(|| {
                        StoreError::setup(format!(
                            "`pgbouncer={value}` is not a boolean: write pgbouncer=true or pgbouncer=false"
                        ))
                    })?);
                }
                k if SQLX_PARAMETERS.contains(&k) || is_option_parameter(k) => {
                    kept.push((key.into_owned(), value));
                }
                _ => ignored.push(key.into_owned()),
            }
        }
        if kept.is_empty() {
            parsed.set_query(None);
        } else {
            parsed.query_pairs_mut().clear().extend_pairs(kept);
        }
        Ok(DatabaseUrl {
            for_sqlx: parsed,
            tls,
            pgbouncer,
            ignored,
        })
    }
}

/// `options[search_path]=...`: sqlx's form of one startup option.
fn is_option_parameter(key: &str) -> bool {
    key.starts_with("options[") && key.ends_with(']')
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_and_scheduler_parameters_are_taken_out_and_unknown_ones_dropped() {
        let url = DatabaseUrl::parse(
            "postgres://app:pw@db:5432/jobs?sslmode=verify-full&sslrootcert=%2Fca.pem\
             &sslpassword=s3cret&application_name=x&pgbouncer=true&connect_timeout=5\
             &options[search_path]=a",
        )
        .unwrap();
        assert_eq!(url.tls.mode.as_deref(), Some("verify-full"));
        assert_eq!(url.tls.root_cert.as_deref(), Some("/ca.pem"));
        assert_eq!(url.pgbouncer, Some(true));
        assert_eq!(url.ignored, ["sslpassword", "connect_timeout"]);
        let for_sqlx = url.for_sqlx.as_str();
        assert!(!for_sqlx.contains("s3cret"), "{for_sqlx}");
        assert!(!for_sqlx.contains("ssl"), "{for_sqlx}");
        assert!(for_sqlx.contains("application_name=x"), "{for_sqlx}");
        assert!(
            for_sqlx.starts_with("postgres://app:pw@db:5432/jobs?"),
            "{for_sqlx}"
        );
    }

    #[test]
    fn no_parameters_no_query() {
        let url = DatabaseUrl::parse("postgres://db/jobs?sslmode=require").unwrap();
        assert_eq!(url.for_sqlx.as_str(), "postgres://db/jobs");
        assert!(DatabaseUrl::parse("postgres://db/x?pgbouncer=maybe").is_err());
    }
}
