//! The admin server's connections and their limits ([`AdminLimits`], defaults below): at most
//! [`MAX_CONNECTIONS`] at once (one more is answered 503 and closed at once), each served by
//! hyper's HTTP/1 with a deadline for a request's headers ([`HEADER_READ_TIMEOUT`], which also
//! ends a keep-alive connection left silent that long), a deadline for a connection that moves
//! no byte either way ([`IDLE_TIMEOUT`]: a client that stops reading its answer or sending its
//! body), and, around every request, [`REQUEST_TIMEOUT`] (503). So a slow or silent client
//! (slowloris) holds a descriptor and a few kilobytes for seconds, not for ever.
//!
//! This module owns sockets and deadlines; it knows nothing of routes or who may ask.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Connections served at once; one more is answered `503` and closed.
pub const MAX_CONNECTIONS: usize = 128;
/// How long a client may take to send a request's headers, counted from when the connection
/// waits for a request (so a keep-alive connection silent this long is closed too).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection on which no byte moves either way for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one request may take, body and answer included, before it is answered `503`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The admin server's limits on connections and requests, each a setting
/// ([`SchedulerBuilder::admin_limits`](crate::SchedulerBuilder::admin_limits), or the
/// `SCHEDULER_ADMIN_*` variables named below); the defaults are this module's constants.
///
/// ```
/// use std::time::Duration;
/// let limits = scheduler::admin::AdminLimits::default().request_timeout(Duration::from_secs(5));
/// assert_eq!(limits.max_connections, scheduler::admin::MAX_CONNECTIONS);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdminLimits {
    /// Connections served at once (`SCHEDULER_ADMIN_MAX_CONNECTIONS`, default
    /// [`MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// How long a client may take to send a request's headers
    /// (`SCHEDULER_ADMIN_HEADER_TIMEOUT`, default [`HEADER_READ_TIMEOUT`]).
    pub header_read_timeout: Duration,
    /// How long a connection may move no byte (`SCHEDULER_ADMIN_IDLE_TIMEOUT`, default
    /// [`IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
    /// How long one request may take (`SCHEDULER_ADMIN_REQUEST_TIMEOUT`, default
    /// [`REQUEST_TIMEOUT`]).
    pub request_timeout: Duration,
    /// API and metrics requests served at once (`SCHEDULER_ADMIN_MAX_CONCURRENT_READS`, default
    /// [`MAX_CONCURRENT_READS`]).
    pub max_concurrent_reads: usize,
}

impl Default for AdminLimits {
    fn default() -> Self {
        Self {
            max_connections: MAX_CONNECTIONS,
            header_read_timeout: HEADER_READ_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
            max_concurrent_reads: MAX_CONCURRENT_READS,
        }
    }
}

impl AdminLimits {
    /// Connections served at once; one more is answered `503` and closed. Default
    /// [`MAX_CONNECTIONS`].
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// How long a client may take to send a request's headers. Default
    /// [`HEADER_READ_TIMEOUT`].
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// How long a connection may move no byte either way. Default [`IDLE_TIMEOUT`].
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// How long one request may take, body and answer included, before it is answered `503`.
    /// Default [`REQUEST_TIMEOUT`].
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// API (`/api/...`) and `/metrics` requests served at once; the others wait their turn
    /// within the request timeout. Default [`MAX_CONCURRENT_READS`].
    pub fn max_concurrent_reads(mut self, reads: usize) -> Self {
        self.max_concurrent_reads = reads;
        self
    }

    /// Refuses a limit of zero, naming its variable.
    pub(crate) fn validate(&self) -> crate::Result<()> {
        let zero = |name: &'static str, what: &str| {
            Err(crate::Error::InvalidSetting {
                name: name.into(),
                message: format!("the admin server's {what} must be more than zero"),
            })
        };
        if self.max_connections == 0 {
            return zero(crate::vars::ADMIN_MAX_CONNECTIONS, "connection cap");
        }
        if self.max_concurrent_reads == 0 {
            return zero(
                crate::vars::ADMIN_MAX_CONCURRENT_READS,
                "count of API requests served at once",
            );
        }
        for (timeout, name, what) in [
            (
                self.header_read_timeout,
                crate::vars::ADMIN_HEADER_TIMEOUT,
                "header read timeout",
            ),
            (
                self.idle_timeout,
                crate::vars::ADMIN_IDLE_TIMEOUT,
                "idle timeout",
            ),
            (
                self.request_timeout,
                crate::vars::ADMIN_REQUEST_TIMEOUT,
                "request timeout",
            ),
        ] {
            if timeout.is_zero() {
                return zero(name, what);
            }
        }
        Ok(())
    }
}

/// Serves `listener` with `router` until `stop`, then lets requests in flight finish.
pub(super) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: AdminLimits,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let mut connections = tokio::task::JoinSet::new();
    let mut at_cap = false;
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, say: wait a little instead of spinning.
                    tracing::warn!(error = %e, "admin server: accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => {
                at_cap = false;
                let router = router.clone();
                let stop = stop.clone();
                connections.spawn(async move {
                    connection(stream, peer, router, limits, stop).await;
                    drop(permit);
                });
            }
            Err(_) => {
                if !at_cap {
                    tracing::warn!(
                        max = limits.max_connections,
                        "admin server: connection cap reached; refusing new connections (503) \
                         until some close"
                    );
                    at_cap = true;
                }
                connections.spawn(refuse(stream, limits.max_connections));
            }
        }
    }
    while connections.join_next().await.is_some() {}
}

/// Answers a connection beyond the cap with `503` and closes it, without reading a request.
async fn refuse(mut stream: TcpStream, max_connections: usize) {
    let body = format!(
        r#"{{"error":"unavailable","message":"the admin server has {max_connections} connections open, its most; try again shortly"}}"#
    );
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         x-content-type-options: nosniff\r\nretry-after: 1\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

/// Serves one connection until it closes, breaks a deadline, or the server stops (then the
/// request in flight finishes and the connection closes).
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: axum::Router,
    limits: AdminLimits,
    stop: CancellationToken,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: Arc::clone(&activity),
    });
    let service = hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let mut router = router.clone();
        async move { tower::Service::call(&mut router, request).await }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let conn = http.serve_connection(io, service);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "admin server: connection ended");
                }
                return;
            }
            () = stop.cancelled(), if !stopping => {
                conn.as_mut().graceful_shutdown();
                stopping = true;
            }
            () = activity.idle_for(limits.idle_timeout) => {
                tracing::debug!(%peer, "admin server: connection idle too long; closed");
                return;
            }
        }
    }
}

/// Requests to `/api/...` and `/metrics` served at once; more wait for a turn (within
/// [`REQUEST_TIMEOUT`]). They share the engine's store pool, runtime and the machine's cores,
/// which must stay free for claims and lock renewals: with 50 clients reading the API beside
/// 1,000 tasks every 5 s on 2 cores, the handlers' lag p99 was 2.4-2.6x the quiet one's with 2
/// at once, 0.8-1.8x with 1 (BENCHMARKS.md, "Engine lag under admin load").
pub const MAX_CONCURRENT_READS: usize = 1;

/// Middleware: at most [`MAX_CONCURRENT_READS`] API and metrics requests at once; probes, the
/// OpenAPI document and the dashboard's assets pass straight through.
pub(super) async fn bounded(
    axum::extract::State(turns): axum::extract::State<Arc<Semaphore>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    if !(path.starts_with("/api/") || path == "/metrics") {
        return next.run(request).await;
    }
    let Ok(_turn) = turns.acquire_owned().await else {
        return super::error::ApiError::unavailable("the admin server is stopping").into_response();
    };
    next.run(request).await
}

/// Middleware: a request that takes longer than its limit (`request_timeout`, default
/// [`REQUEST_TIMEOUT`]) is answered `503`.
pub(super) async fn deadline(
    axum::extract::State(limit): axum::extract::State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => super::error::ApiError::unavailable(format!(
            "the request took longer than {} and was stopped",
            humantime::format_duration(limit)
        ))
        .into_response(),
    }
}

/// When a connection last moved a byte.
struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }

    /// Completes once no byte has moved for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last.load(Ordering::Relaxed));
            let deadline = last + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A stream that notes every byte moved in [`Activity`].
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        poll
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
