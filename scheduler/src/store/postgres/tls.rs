//! TLS to PostgreSQL with libpq's rules, applied to sqlx's options (rustls underneath, no
//! OpenSSL).
//!
//! Each setting comes from the URL, else libpq's environment variable, else libpq's default:
//!
//! | setting | URL | environment | default |
//! |---|---|---|---|
//! | mode | `sslmode` | `PGSSLMODE` | `prefer` (`verify-full` with `sslrootcert=system`) |
//! | CA bundle | `sslrootcert` | `PGSSLROOTCERT` | `~/.postgresql/root.crt` if it exists |
//! | client certificate | `sslcert` | `PGSSLCERT` | `~/.postgresql/postgresql.crt` if it exists |
//! | client key | `sslkey` | `PGSSLKEY` | `~/.postgresql/postgresql.key` if it exists |
//!
//! and libpq's rules on top: `require` with a CA bundle checks the chain (`verify-ca`);
//! `verify-ca`/`verify-full` without any CA bundle is an error rather than a silent fallback;
//! `sslrootcert=system` means the public roots (Mozilla's, built in) and only with
//! `verify-full`. One difference remains, from sqlx: with `verify-ca`/`verify-full` the public
//! roots are trusted besides the given bundle. Invalid values and missing files are setup
//! errors naming the setting, so a typo never silently means "no TLS".

use std::path::{Path, PathBuf};

use sqlx::postgres::{PgConnectOptions, PgSslMode};

use crate::store::{StoreError, StoreResult};

/// The TLS parameters as written in a URL (unset: see the environment, then the defaults).
#[derive(Debug, Default, Clone)]
pub(super) struct TlsParams {
    pub(super) mode: Option<String>,
    pub(super) root_cert: Option<String>,
    pub(super) cert: Option<String>,
    pub(super) key: Option<String>,
}

/// libpq's `sslmode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    fn to_sqlx(self) -> PgSslMode {
        match self {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Allow => PgSslMode::Allow,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require => PgSslMode::Require,
            SslMode::VerifyCa => PgSslMode::VerifyCa,
            SslMode::VerifyFull => PgSslMode::VerifyFull,
        }
    }
}

/// Where the server's certificate is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    /// Not checked (or no bundle for `prefer`/`require`).
    None,
    /// A PEM bundle.
    File(PathBuf),
    /// `sslrootcert=system`: the public roots built into the binary.
    System,
}

/// What the connection does, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TlsSettings {
    mode: SslMode,
    roots: Roots,
    client: Option<(PathBuf, PathBuf)>,
}

impl TlsSettings {
    /// Resolves `url` with libpq's environment (`env`) and files under `home`.
    pub(super) fn resolve(
        url: &TlsParams,
        env: impl Fn(&str) -> Option<String>,
        home: Option<&Path>,
    ) -> StoreResult<TlsSettings> {
        let pick = |from_url: &Option<String>, var: &'static str, key: &'static str| match from_url
        {
            Some(v) => Some((v.clone(), key)),
            None => env(var).filter(|v| !v.is_empty()).map(|v| (v, var)),
        };
        let default_file = |name: &str| {
            home.map(|h| h.join(".postgresql").join(name))
                .filter(|p| p.is_file())
        };

        let roots = match pick(&url.root_cert, "PGSSLROOTCERT", "sslrootcert") {
            Some((v, _)) if v == "system" => Roots::System,
            Some((v, _)) => Roots::File(PathBuf::from(v)),
            None => default_file("root.crt").map_or(Roots::None, Roots::File),
        };
        let mode = match pick(&url.mode, "PGSSLMODE", "sslmode") {
            Some((v, from)) => parse_mode(&v, from)?,
            None if roots == Roots::System => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        let mode = match (mode, &roots) {
            (SslMode::VerifyFull, _) => mode,
            (_, Roots::System) => {
                return Err(StoreError::setup(
                    "sslrootcert=system (the public roots) needs sslmode=verify-full, as in libpq: \
                     checking a public certificate without its host name proves nothing",
                ));
            }
            // libpq: "if a root CA file exists, require behaves as verify-ca".
            (SslMode::Require, Roots::File(_)) => SslMode::VerifyCa,
            _ => mode,
        };
        let verifies = matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull);
        if verifies && roots == Roots::None {
            return Err(StoreError::setup(format!(
                "sslmode={} needs the CA that signed the server's certificate: set sslrootcert=PATH \
                 in the URL (or PGSSLROOTCERT), or sslrootcert=system for the public roots \
                 (managed databases with a publicly trusted certificate); \
                 ~/.postgresql/root.crt does not exist",
                mode.name()
            )));
        }
        let roots = if verifies { roots } else { Roots::None };
        if let Roots::File(path) = &roots {
            check_file(path, "sslrootcert")?;
        }

        let cert = pick(&url.cert, "PGSSLCERT", "sslcert");
        let key = pick(&url.key, "PGSSLKEY", "sslkey");
        let client = match (cert, key) {
            (Some((cert, _)), Some((key, _))) => Some((PathBuf::from(cert), PathBuf::from(key))),
            (Some((_, from)), None) | (None, Some((_, from))) => {
                return Err(StoreError::setup(format!(
                    "a client certificate needs both sslcert and sslkey (or PGSSLCERT and \
                     PGSSLKEY), and only `{from}` is set"
                )));
            }
            (None, None) => default_file("postgresql.crt").zip(default_file("postgresql.key")),
        };
        let client = if mode == SslMode::Disable {
            None
        } else {
            client
        };
        if let Some((cert, key)) = &client {
            check_file(cert, "sslcert")?;
            check_file(key, "sslkey")?;
        }
        Ok(TlsSettings {
            mode,
            roots,
            client,
        })
    }

    /// Resolves `url` with the process's environment and home directory.
    pub(super) fn from_env(url: &TlsParams) -> StoreResult<TlsSettings> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Self::resolve(url, |var| std::env::var(var).ok(), home.as_deref())
    }

    /// Sets these on `options` (overriding whatever sqlx read from the environment itself).
    pub(super) fn apply(&self, options: PgConnectOptions) -> PgConnectOptions {
        let mut options = options.ssl_mode(self.mode.to_sqlx());
        if let Roots::File(path) = &self.roots {
            options = options.ssl_root_cert(path);
        }
        if let Some((cert, key)) = &self.client {
            options = options.ssl_client_cert(cert).ssl_client_key(key);
        }
        options
    }
}

fn parse_mode(value: &str, from: &str) -> StoreResult<SslMode> {
    Ok(match value {
        "disable" => SslMode::Disable,
        "allow" => SslMode::Allow,
        "prefer" => SslMode::Prefer,
        "require" => SslMode::Require,
        "verify-ca" => SslMode::VerifyCa,
        "verify-full" => SslMode::VerifyFull,
        _ => {
            return Err(StoreError::setup(format!(
                "{from}=`{}` is not an SSL mode: use disable, allow, prefer, require, verify-ca \
                 or verify-full",
                value.escape_debug()
            )));
        }
    })
}

fn check_file(path: &Path, setting: &str) -> StoreResult<()> {
    std::fs::File::open(path).map(drop).map_err(|e| {
        StoreError::setup(format!(
            "{setting} file `{}` cannot be read: {e}",
            path.display()
        ))
    })
}

/// Rewords a TLS failure of a connection so the user learns which check failed and what to
/// change; `None` when `error` is not one.
pub(super) fn explain(error: &sqlx::Error) -> Option<String> {
    let sqlx::Error::Tls(inner) = error else {
        return None;
    };
    let text = inner.to_string();
    let hint = if text.contains("UnknownIssuer") {
        "the server's certificate is not signed by a CA in sslrootcert (or PGSSLROOTCERT): \
         point it at the CA bundle of your database provider"
    } else if text.contains("NotValidForName") || text.contains("not valid for name") {
        "the server's certificate is not valid for the host name in the URL: connect with a \
         name the certificate lists, or use sslmode=verify-ca to check the chain only"
    } else if text.contains("Expired") {
        "the server's certificate has expired"
    } else if text.contains("does not support TLS") {
        "the server does not offer TLS: use sslmode=prefer or disable, or turn on ssl on the server"
    } else {
        "the TLS handshake with the server failed"
    };
    Some(format!("{hint} ({text})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(mode: Option<&str>, root: Option<&str>) -> TlsParams {
        TlsParams {
            mode: mode.map(str::to_owned),
            root_cert: root.map(str::to_owned),
            ..TlsParams::default()
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_default_is_prefer_and_system_roots_mean_verify_full() {
        let s = TlsSettings::resolve(&params(None, None), no_env, None).unwrap();
        assert_eq!(s.mode, SslMode::Prefer);
        let s = TlsSettings::resolve(&params(None, Some("system")), no_env, None).unwrap();
        assert_eq!((s.mode, s.roots), (SslMode::VerifyFull, Roots::System));
        let e = TlsSettings::resolve(&params(Some("verify-ca"), Some("system")), no_env, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("verify-full"), "{e}");
    }

    #[test]
    fn the_url_wins_over_the_environment_and_defaults_come_from_home() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".postgresql");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("root.crt"), "x").unwrap();
        let env = |var: &str| (var == "PGSSLMODE").then(|| "require".to_owned());
        let s = TlsSettings::resolve(&params(None, None), env, Some(home.path())).unwrap();
        // require with a root file: verify-ca, as libpq.
        assert_eq!(s.mode, SslMode::VerifyCa);
        assert_eq!(s.roots, Roots::File(dir.join("root.crt")));
        let s =
            TlsSettings::resolve(&params(Some("disable"), None), env, Some(home.path())).unwrap();
        assert_eq!((s.mode, s.roots), (SslMode::Disable, Roots::None));
        let e = TlsSettings::resolve(&params(None, None), |_| Some("nope".into()), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("PGSSLMODE=`nope`"), "{e}");
    }
}
