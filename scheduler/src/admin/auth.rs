//! Who may read and who may change (the rule is in the module docs of [`crate::admin`]):
//! what admits a request or refuses it with a JSON error (the extractors, [`Reader`] and
//! [`Operator`], are taken from the handlers' state in `super::state`). Two tokens: the operator's
//! (`SCHEDULER_ADMIN_TOKEN`: reads and mutations) and the viewer's
//! (`SCHEDULER_ADMIN_VIEWER_TOKEN`: reads only, e.g. for a Prometheus scrape). A refusal for a
//! missing, malformed or wrong token is counted and logged, rate-limited
//! ([`super::auth_failures`]); the token presented never is.

use std::net::SocketAddr;
use std::time::Instant;

use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::auth_failures::{Failure, FailureLog};
use super::error::ApiError;
use crate::operate::Actor;
use crate::{Error, Result};

/// The actor name of a mutation made with the admin token and no `X-Scheduler-Actor` header.
pub(crate) const TOKEN_ACTOR: &str = "admin-token";
/// The header naming the person behind a mutation, for the audit trail.
pub(crate) const ACTOR_HEADER: &str = "x-scheduler-actor";
const MIN_TOKEN_LEN: usize = 16;
const MAX_ACTOR_LEN: usize = 100;

/// The configured tokens (as digests, so comparing takes the same time whatever the input's
/// length), whether the server listens on loopback, and the failures' log limit.
pub(crate) struct Auth {
    token: Option<[u8; 32]>,
    viewer: Option<[u8; 32]>,
    loopback: bool,
    failures: FailureLog,
}

/// Whose token a request presents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Operator,
    Viewer,
}

/// A refused request: the answer, and why it failed to authenticate when it did (counted and
/// logged; a mutation refused because none is enabled is not a failed authentication).
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) error: ApiError,
    failure: Option<Failure>,
}

impl Refused {
    fn failed(failure: Failure, error: ApiError) -> Self {
        Self {
            error,
            failure: Some(failure),
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Refuses a token that is too short or holds spaces or control characters, naming `name`.
fn check_token(name: &'static str, token: &str) -> Result<()> {
    let invalid = |message: &str| Error::InvalidSetting {
        name: name.into(),
        message: message.to_owned(),
    };
    if token.chars().count() < MIN_TOKEN_LEN {
        return Err(invalid(
            "must be at least 16 characters (use a long random string)",
        ));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid("must not contain spaces or control characters"));
    }
    Ok(())
}

impl Auth {
    /// `token` is the operator's, `viewer` the read-only one's; both at least 16 characters,
    /// and different.
    pub(crate) fn new(token: Option<&str>, viewer: Option<&str>, loopback: bool) -> Result<Self> {
        if let Some(token) = token {
            check_token(crate::vars::ADMIN_TOKEN, token)?;
        }
        if let Some(viewer) = viewer {
            check_token(crate::vars::ADMIN_VIEWER_TOKEN, viewer)?;
            if token.is_some_and(|t| bool::from(digest(t).ct_eq(&digest(viewer)))) {
                return Err(Error::InvalidSetting {
                    name: crate::vars::ADMIN_VIEWER_TOKEN.into(),
                    message: format!(
                        "must differ from {} (the viewer token only reads)",
                        crate::vars::ADMIN_TOKEN
                    ),
                });
            }
        }
        Ok(Self {
            token: token.map(digest),
            viewer: viewer.map(digest),
            loopback,
            failures: FailureLog::default(),
        })
    }

    /// The bearer token of the request, if it presents one.
    fn presented(parts: &Parts) -> Result<Option<&str>, Refused> {
        let Some(value) = parts.headers.get(axum::http::header::AUTHORIZATION) else {
            return Ok(None);
        };
        value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|t| Some(t.trim()))
            .ok_or_else(|| {
                Refused::failed(
                    Failure::Malformed,
                    ApiError::unauthorized("the Authorization header must be `Bearer <token>`"),
                )
            })
    }

    /// Whose token `presented` is (constant time, both compared whatever the first gives).
    fn role_of(&self, presented: &str) -> Option<Role> {
        let presented = digest(presented);
        let same = |token: Option<[u8; 32]>| token.is_some_and(|t| bool::from(t.ct_eq(&presented)));
        let (operator, viewer) = (same(self.token), same(self.viewer));
        if operator {
            Some(Role::Operator)
        } else if viewer {
            Some(Role::Viewer)
        } else {
            None
        }
    }

    /// Checks a presented token: whose it is, `None` when none is presented.
    fn check_presented(&self, parts: &Parts) -> Result<Option<Role>, Refused> {
        match Self::presented(parts)? {
            None => Ok(None),
            Some(t) => match self.role_of(t) {
                Some(role) => Ok(Some(role)),
                None if self.token.is_none() && self.viewer.is_none() => Err(Refused::failed(
                    Failure::WrongToken,
                    ApiError::unauthorized(
                        "this admin server has no token configured (SCHEDULER_ADMIN_TOKEN); send none",
                    ),
                )),
                None => Err(Refused::failed(
                    Failure::WrongToken,
                    ApiError::unauthorized("wrong admin token"),
                )),
            },
        }
    }

    pub(crate) fn admit_read(&self, parts: &Parts) -> Result<(), Refused> {
        if self.check_presented(parts)?.is_some() || self.loopback {
            return Ok(());
        }
        if self.token.is_some() || self.viewer.is_some() {
            Err(Refused::failed(
                Failure::Missing,
                ApiError::unauthorized(
                    "this admin server listens beyond loopback: send `Authorization: Bearer <SCHEDULER_ADMIN_TOKEN or SCHEDULER_ADMIN_VIEWER_TOKEN>`",
                ),
            ))
        } else {
            Err(Refused::failed(
                Failure::Missing,
                ApiError::forbidden(
                    "reads are refused on a non-loopback address without a token: set SCHEDULER_ADMIN_TOKEN or SCHEDULER_ADMIN_VIEWER_TOKEN",
                ),
            ))
        }
    }

    pub(crate) fn admit_mutation(&self, parts: &Parts) -> Result<(), Refused> {
        if self.token.is_none() {
            return Err(Refused {
                error: ApiError::forbidden(
                    "mutations are disabled: set SCHEDULER_ADMIN_TOKEN on the node to enable them",
                ),
                failure: None,
            });
        }
        match self.check_presented(parts)? {
            Some(Role::Operator) => Ok(()),
            Some(Role::Viewer) => Err(Refused::failed(
                Failure::ViewerToken,
                ApiError::forbidden(
                    "the viewer token (SCHEDULER_ADMIN_VIEWER_TOKEN) only reads: mutations need `Authorization: Bearer <SCHEDULER_ADMIN_TOKEN>`",
                ),
            )),
            None => Err(Refused::failed(
                Failure::Missing,
                ApiError::unauthorized(
                    "mutations need `Authorization: Bearer <SCHEDULER_ADMIN_TOKEN>`",
                ),
            )),
        }
    }

    /// The answer to a refused request, its failure counted in `metrics` and logged (at most
    /// one line per peer address per minute, the next saying how many were left out). The
    /// line names the peer, the method, the path and the reason; never the token.
    fn refuse(
        &self,
        refused: Refused,
        parts: &Parts,
        metrics: &crate::metrics::Metrics,
    ) -> ApiError {
        if let Some(failure) = refused.failure {
            metrics.admin_auth_failure(failure.reason());
            let peer = parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(peer)| *peer);
            if let Some(suppressed) = self.failures.admit(peer.map(|p| p.ip()), Instant::now()) {
                let peer = peer.map_or_else(|| "unknown".to_owned(), |p| p.to_string());
                tracing::warn!(
                    %peer,
                    reason = failure.reason(),
                    method = %parts.method,
                    path = %crate::bounds::printable(parts.uri.path()),
                    suppressed,
                    "admin request refused: authentication failed (further failures of this peer \
                     are logged at most once a minute, `suppressed` counts those left out)"
                );
            }
        }
        refused.error
    }
}

/// Admits a read (see the rule); extracted from the handlers' state (`super::state`).
pub(crate) struct Reader;

/// Admits a mutation and says who makes it, from where; extracted from the handlers' state
/// (`super::state`).
pub(crate) struct Operator(pub(crate) Actor);

impl Auth {
    /// Admits `parts` as a read, or refuses it (counted in `metrics` and logged).
    pub(crate) fn reader(
        &self,
        parts: &Parts,
        metrics: &crate::metrics::Metrics,
    ) -> Result<Reader, ApiError> {
        self.admit_read(parts)
            .map_err(|r| self.refuse(r, parts, metrics))?;
        Ok(Reader)
    }

    /// Admits `parts` as a mutation, naming its actor, or refuses it (counted in `metrics` and
    /// logged).
    pub(crate) fn operator(
        &self,
        parts: &Parts,
        metrics: &crate::metrics::Metrics,
    ) -> Result<Operator, ApiError> {
        self.admit_mutation(parts)
            .map_err(|r| self.refuse(r, parts, metrics))?;
        let name = match parts
            .headers
            .get(ACTOR_HEADER)
            .map(|v| actor_name(v.as_bytes()))
        {
            Some(name) if !name.is_empty() => format!("{name} ({TOKEN_ACTOR})"),
            _ => TOKEN_ACTOR.to_owned(),
        };
        let source = match parts.extensions.get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(peer)) => format!("http@{peer}"),
            None => "http@unknown".to_owned(),
        };
        Ok(Operator(Actor::new(name, source)))
    }
}

/// The `X-Scheduler-Actor` value as an audit name: printable, trimmed, at most 100 characters
/// (what a client sends is recorded, never refused).
fn actor_name(value: &[u8]) -> String {
    String::from_utf8_lossy(value)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .chars()
        .take(MAX_ACTOR_LEN)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(auth: Option<&str>) -> Parts {
        let mut request = axum::http::Request::builder();
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn actor_names_are_printable_and_bounded() {
        assert_eq!(actor_name(b" alice "), "alice");
        assert_eq!(actor_name(b"a\tb"), "a b");
        assert_eq!(actor_name(&[b'x'; 300]).len(), 100);
        assert_eq!(actor_name(b""), "");
    }

    #[test]
    fn short_tokens_are_refused_at_start() {
        let e = Auth::new(Some("short"), None, true)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("SCHEDULER_ADMIN_TOKEN") && e.contains("16"),
            "{e}"
        );
    }

    #[test]
    fn the_rule_of_reads_and_mutations() {
        let token = "0123456789abcdef-token";
        let good = format!("Bearer {token}");
        let none = Auth::new(None, None, true).unwrap();
        assert!(none.admit_read(&parts(None)).is_ok());
        assert_eq!(
            none.admit_mutation(&parts(None)).unwrap_err().error.status,
            403
        );
        assert_eq!(
            none.admit_mutation(&parts(Some(&good)))
                .unwrap_err()
                .error
                .status,
            403
        );

        let open = Auth::new(None, None, false).unwrap();
        assert_eq!(open.admit_read(&parts(None)).unwrap_err().error.status, 403);

        let remote = Auth::new(Some(token), None, false).unwrap();
        assert_eq!(
            remote.admit_read(&parts(None)).unwrap_err().error.status,
            401
        );
        assert!(remote.admit_read(&parts(Some(&good))).is_ok());
        assert!(remote.admit_mutation(&parts(Some(&good))).is_ok());
        let wrong = parts(Some("Bearer 0123456789abcdef-tokeN"));
        assert_eq!(remote.admit_mutation(&wrong).unwrap_err().error.status, 401);
        assert_eq!(remote.admit_read(&wrong).unwrap_err().error.status, 401);
        let basic = parts(Some("Basic dXNlcjpwYXNz"));
        assert_eq!(remote.admit_mutation(&basic).unwrap_err().error.status, 401);

        let local = Auth::new(Some(token), None, true).unwrap();
        assert!(local.admit_read(&parts(None)).is_ok());
        assert_eq!(
            local.admit_mutation(&parts(None)).unwrap_err().error.status,
            401
        );
    }

    #[test]
    fn the_viewer_token_reads_and_never_changes() {
        let (operator, viewer) = ("0123456789abcdef-operator", "0123456789abcdef-viewer");
        let as_operator = parts(Some(&format!("Bearer {operator}")));
        let as_viewer = parts(Some(&format!("Bearer {viewer}")));
        let refused = |r: Result<(), Refused>| {
            let r = r.unwrap_err();
            (r.error.status, r.failure.map(Failure::reason))
        };
        for loopback in [false, true] {
            let auth = Auth::new(Some(operator), Some(viewer), loopback).unwrap();
            assert!(auth.admit_read(&as_viewer).is_ok());
            assert!(auth.admit_read(&as_operator).is_ok());
            assert!(auth.admit_mutation(&as_operator).is_ok());
            assert_eq!(
                refused(auth.admit_mutation(&as_viewer)),
                (403, Some("viewer_token"))
            );
        }
        // A viewer token alone: reads beyond loopback, and no mutation at all.
        let auth = Auth::new(None, Some(viewer), false).unwrap();
        assert!(auth.admit_read(&as_viewer).is_ok());
        assert_eq!(
            refused(auth.admit_read(&parts(None))),
            (401, Some("missing"))
        );
        assert_eq!(
            refused(auth.admit_read(&as_operator)),
            (401, Some("wrong_token"))
        );
        assert_eq!(refused(auth.admit_mutation(&as_viewer)), (403, None));
    }

    #[test]
    fn the_viewer_token_must_differ_and_be_long() {
        let token = "0123456789abcdef-token";
        let e = Auth::new(Some(token), Some(token), false)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("SCHEDULER_ADMIN_VIEWER_TOKEN") && e.contains("differ"),
            "{e}"
        );
        assert!(!e.contains(token), "{e}");
        let e = Auth::new(Some(token), Some("short"), false)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("SCHEDULER_ADMIN_VIEWER_TOKEN") && e.contains("16"),
            "{e}"
        );
    }

    #[test]
    fn failures_have_their_reason() {
        let auth = Auth::new(Some("0123456789abcdef-token"), None, false).unwrap();
        let reason = |r: Result<(), Refused>| r.unwrap_err().failure.map(Failure::reason);
        assert_eq!(reason(auth.admit_read(&parts(None))), Some("missing"));
        assert_eq!(
            reason(auth.admit_read(&parts(Some("Basic x")))),
            Some("malformed")
        );
        let wrong = parts(Some("Bearer 0123456789abcdef-wrong"));
        assert_eq!(reason(auth.admit_mutation(&wrong)), Some("wrong_token"));
        assert_eq!(
            reason(Auth::new(None, None, true).unwrap().admit_mutation(&wrong)),
            None
        );
    }
}
