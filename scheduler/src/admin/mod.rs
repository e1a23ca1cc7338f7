//! The admin HTTP server inside every node: a JSON API described by an OpenAPI 3.1 document
//! (`/openapi.json`, generated from the handlers), Prometheus metrics (`/metrics`) and probes
//! (`/healthz`, `/readyz`). Off unless [`SchedulerBuilder::admin_addr`](crate::SchedulerBuilder::admin_addr) (or
//! `SCHEDULER_ADMIN_ADDR`, e.g. `127.0.0.1:9870`) is set.
//!
//! ```no_run
//! # async fn demo() -> scheduler::Result<()> {
//! let scheduler = scheduler::Scheduler::builder()
//!     .database_url("postgres://app@127.0.0.1/app")
//!     .admin_addr("127.0.0.1:9870".parse().unwrap())
//!     .admin_token("a-long-random-secret-token")
//!     .build()?;
//! println!("admin API on http://{}", scheduler.admin_addr().unwrap());
//! scheduler.run_until(scheduler::shutdown_signal()).await
//! # }
//! ```
//!
//! # Who may do what
//!
//! | route | rule |
//! |---|---|
//! | `/healthz`, `/readyz`, `/openapi.json`, the dashboard's page and assets (`/`, `/assets/...`) | open (they carry no data or credentials; the page reads the API under its rule) |
//! | reads: `GET /api/...`, `/metrics` | open when the server listens on a loopback address; elsewhere `Authorization: Bearer <token>`, the operator's (`SCHEDULER_ADMIN_TOKEN`) or the viewer's (`SCHEDULER_ADMIN_VIEWER_TOKEN`); refused when neither is set |
//! | mutations: `POST /api/tasks/{name}/trigger`, `.../pause`, `.../resume`, ... | always `Authorization: Bearer <SCHEDULER_ADMIN_TOKEN>` (the viewer token: 403); with no operator token set every mutation is refused (403) |
//!
//! Before any of that, a request whose `Host` or `Origin` names another site is refused (403):
//! the guard against DNS rebinding, see `SCHEDULER_ADMIN_HOSTS` and
//! the `origin` module for the rule. Every answer carries `X-Content-Type-Options: nosniff`.
//!
//! A request that presents a token presents the right one, or is refused (401), loopback or not.
//! Tokens are compared in constant time and never logged. A request refused for its token is
//! counted (`scheduler_admin_auth_failures_total{reason}`) and logged at warn with its peer,
//! at most once a minute per peer address (see `docs/admin.md`). Every mutation is written to the
//! audit trail (`GET /api/audit`): who (the `X-Scheduler-Actor` header if given, with
//! `admin-token`), what, when, and from where (the peer address).
//!
//! Errors are JSON, `{"error": "not_found", "message": "..."}`, with the matching status.
//!
//! # Limits
//!
//! At most [`MAX_CONNECTIONS`] connections at once (one more is answered 503 and closed); a
//! request's headers must arrive within [`HEADER_READ_TIMEOUT`] (a keep-alive connection silent
//! that long is closed), a connection that moves no byte for [`IDLE_TIMEOUT`] is closed, and a
//! request taking longer than [`REQUEST_TIMEOUT`] is answered 503 (each a setting:
//! [`AdminLimits`], `SCHEDULER_ADMIN_MAX_CONNECTIONS`, `SCHEDULER_ADMIN_HEADER_TIMEOUT`,
//! `SCHEDULER_ADMIN_IDLE_TIMEOUT`, `SCHEDULER_ADMIN_REQUEST_TIMEOUT`). HTTP/1.1 only. At most
//! [`MAX_CONCURRENT_READS`] (`SCHEDULER_ADMIN_MAX_CONCURRENT_READS`) requests to `/api/...` and `/metrics` are served at once (the
//! others wait, within the request deadline), so readers cannot take the engine's database
//! connections and threads; the probes and the dashboard's assets never wait. Heavy walks
//! (`/api/ticks`) run on blocking threads, not on the async threads the engine's timers use.
//!
//! The router is assembled here from the documented routes (`document`: one module per resource
//! in `api/`, the probes, the OpenAPI document) and the web dashboard at `/` (`dashboard/`:
//! embedded assets under a strict Content-Security-Policy, reading this same API). What every
//! handler gets, and the extractors that admit a request, are in `state`; the modules below
//! import from their siblings' leaves and never from this one. The server runs beside the engine, started and stopped by
//! [`Scheduler::run_until`](crate::Scheduler::run_until), and sees it only through one view (the
//! engine's `EngineView`: what it may read); its mutations go through the store
//! (the crate's operator actions), as every operator surface's do.

mod api;
mod auth;
mod auth_failures;
mod dashboard;
mod document;
mod error;
mod openapi;
mod origin;
mod probes;
mod serve;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use state::AdminState;

use crate::engine::EngineView;
use crate::{Error, Result};

pub use document::openapi_document;
pub use serve::{
    AdminLimits, HEADER_READ_TIMEOUT, IDLE_TIMEOUT, MAX_CONCURRENT_READS, MAX_CONNECTIONS,
    REQUEST_TIMEOUT,
};

/// The admin server's bound socket, made at build time so an address in use is a start-up
/// error and port 0 is resolved before the node runs.
pub(crate) struct AdminListener {
    listener: std::net::TcpListener,
    addr: SocketAddr,
    auth: auth::Auth,
    hosts: origin::HostRule,
    limits: AdminLimits,
}

impl AdminListener {
    /// Binds `addr`; `token` is what mutations must present, `viewer` a token that only reads;
    /// `hosts` the names it answers
    /// beyond its address and loopback (`SCHEDULER_ADMIN_HOSTS`); `limits` its connections'
    /// and requests'.
    pub(crate) fn bind(
        addr: SocketAddr,
        token: Option<&str>,
        viewer: Option<&str>,
        hosts: &[String],
        limits: AdminLimits,
    ) -> Result<Self> {
        limits.validate()?;
        let auth = auth::Auth::new(token, viewer, addr.ip().is_loopback())?;
        let hosts = origin::HostRule::new(addr, hosts)?;
        let invalid = |e: std::io::Error| Error::InvalidSetting {
            name: crate::vars::ADMIN_ADDR.into(),
            message: format!("the admin server cannot listen on {addr}: {e}"),
        };
        let listener = std::net::TcpListener::bind(addr).map_err(invalid)?;
        listener.set_nonblocking(true).map_err(invalid)?;
        let addr = listener.local_addr().map_err(invalid)?;
        Ok(Self {
            listener,
            addr,
            auth,
            hosts,
            limits,
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

/// A running admin server; [`stop`](Self::stop) ends it gracefully.
pub(crate) struct AdminServer {
    stop: CancellationToken,
    handle: JoinHandle<()>,
}

impl AdminServer {
    /// Stops accepting, lets requests in flight finish (up to 5 s), and returns.
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        let abort = self.handle.abort_handle();
        if tokio::time::timeout(Duration::from_secs(5), self.handle)
            .await
            .is_err()
        {
            tracing::warn!("admin server requests still open after 5s; closing them");
            abort.abort();
        }
    }
}

/// The whole router, with JSON errors for unknown paths and methods, the request deadline, and
/// outermost the `Host`/`Origin` guard and `nosniff`.
fn router(state: AdminState, hosts: origin::HostRule, limits: AdminLimits) -> axum::Router {
    let (router, _) = document::routes().split_for_parts();
    router
        .merge(dashboard::router())
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(tokio::sync::Semaphore::new(limits.max_concurrent_reads)),
            serve::bounded,
        ))
        .layer(axum::middleware::from_fn_with_state(
            limits.request_timeout,
            serve::deadline,
        ))
        // Only for clients that ask (`Accept-Encoding: gzip`); small answers stay as they are.
        .layer(tower_http::compression::CompressionLayer::new().gzip(true))
        .layer(axum::middleware::from_fn_with_state(Arc::new(hosts), guard))
}

/// Refuses a request whose `Host` or `Origin` names another site; marks every answer `nosniff`.
async fn guard(
    axum::extract::State(hosts): axum::extract::State<Arc<origin::HostRule>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut response = match hosts.admit(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    };
    response.headers_mut().insert(
        axum::http::header::X_CONTENT_TYPE_OPTIONS,
        axum::http::HeaderValue::from_static("nosniff"),
    );
    response
}

/// Starts serving `listener` for the engine seen through `engine`.
pub(crate) fn spawn(listener: AdminListener, engine: EngineView) -> Result<AdminServer> {
    let addr = listener.addr;
    let tcp = tokio::net::TcpListener::from_std(listener.listener).map_err(|e| {
        Error::InvalidSetting {
            name: crate::vars::ADMIN_ADDR.into(),
            message: format!("the admin server cannot listen on {addr}: {e}"),
        }
    })?;
    let state = AdminState {
        engine,
        auth: Arc::new(listener.auth),
    };
    let limits = listener.limits;
    let app = router(state, listener.hosts, limits);
    let stop = CancellationToken::new();
    let graceful = stop.clone();
    let handle = tokio::spawn(async move {
        tracing::info!(%addr, "admin server listening");
        serve::serve(tcp, app, limits, graceful).await;
    });
    Ok(AdminServer { stop, handle })
}
