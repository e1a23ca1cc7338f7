//! The admin server under hostile use, over real TCP against a real node (an SQLite file, so
//! these run in every mode of the suite): a foreign `Host` or a cross-origin `Origin` is refused
//! (DNS rebinding), a client that sends its headers a byte a second or nothing at all is cut off,
//! the connection cap answers at once, and every answer says `nosniff`. The viewer token reads
//! and cannot change; failed authentications are counted and logged, rate-limited, never with
//! the token presented (judged by the node's own log, captured for this file).
//!
//! Requests are written by hand on a `TcpStream`: an HTTP client library would fix the `Host`
//! header and never send a request slowly.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::store::SqliteStore;
use scheduler::{Scheduler, SchedulerBuilder, TaskRegistry, task};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

struct Node {
    addr: SocketAddr,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<scheduler::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Node {
    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.handle)
            .await
            .expect("node stops within a minute")
            .unwrap()
            .expect("node ran without error");
    }
}

/// A node on a fresh SQLite file with no tasks, its admin server on a free loopback port.
fn start(configure: impl FnOnce(SchedulerBuilder) -> SchedulerBuilder) -> Node {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("scheduler.db"))
        .connect()
        .unwrap();
    let builder = Scheduler::builder()
        .store(Arc::new(store))
        .registry(TaskRegistry::collect().unwrap().retain(|_| false))
        .shutdown_timeout(Duration::from_secs(5))
        .admin_addr("127.0.0.1:0".parse().unwrap());
    let scheduler = configure(builder).build().unwrap();
    let addr = scheduler.admin_addr().unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let handle = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    Node {
        addr,
        stop,
        handle,
        _dir: dir,
    }
}

/// The warnings and errors every node of this process logged (one subscriber for the whole
/// test binary, installed by [`init_tracing`]).
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `scheduler_tests::init_tracing`, plus the capture of every `WARN` and `ERROR` line into
/// [`LOG`] (whatever `RUST_LOG` says).
fn init_tracing() {
    use tracing_subscriber::prelude::*;
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let shown = tracing_subscriber::fmt::layer()
            .with_test_writer()
            .with_filter(filter);
        let captured = tracing_subscriber::fmt::layer()
            .with_writer(|| LogWriter)
            .with_ansi(false)
            .with_filter(tracing::level_filters::LevelFilter::WARN);
        tracing_subscriber::registry()
            .with(shown)
            .with(captured)
            .try_init()
            .expect("no other subscriber in this test binary");
    });
}

/// The captured lines that contain `needle`.
fn logged(needle: &str) -> Vec<String> {
    String::from_utf8_lossy(&LOG.lock().unwrap())
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_owned)
        .collect()
}

/// An answer: status, headers (names lowercase) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `GET path` with exactly `headers` (plus `Connection: close`) and reads the answer.
async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    request(addr, "GET", path, headers).await.0
}

/// Sends `method path` with no body, exactly `headers` (plus `Connection: close` and, for a
/// POST, `Content-Length: 0`); the answer, and the client's own address (the node's peer).
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (Answer, SocketAddr) {
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if method == "POST" {
        request.push_str("Content-Length: 0\r\n");
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let client = stream.local_addr().unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut raw))
        .await
        .expect("an answer within a minute")
        .unwrap();
    (parse(&raw), client)
}

fn parse(raw: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

async fn ready(addr: SocketAddr) {
    let host = addr.to_string();
    scheduler_tests::wait_until(Duration::from_secs(60), "the node is ready", || async {
        get(addr, "/readyz", &[("Host", &host)]).await.status == 200
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_or_a_cross_origin_request_is_refused() {
    let node = start(|b| b.admin_hosts(["scheduler.internal", "ops.example:8443"]));
    let addr = node.addr;
    ready(addr).await;
    let bound = addr.to_string();
    let port = addr.port();
    let paths = ["/api/tasks", "/metrics", "/healthz", "/", "/openapi.json"];

    // A DNS-rebinding page: the browser sends the attacker's name as Host.
    for host in [
        format!("evil.example:{port}"),
        "evil.example".to_owned(),
        format!("localhost.evil.example:{port}"),
        "scheduler.internal.evil.example".to_owned(),
        // The allow-list's port is part of the entry.
        "ops.example:9999".to_owned(),
    ] {
        for path in paths {
            let answer = get(addr, path, &[("Host", &host)]).await;
            assert_eq!(answer.status, 403, "Host {host} on {path}: {answer:?}");
            assert!(answer.body.contains("forbidden"), "{answer:?}");
            assert!(answer.body.contains("SCHEDULER_ADMIN_HOSTS"), "{answer:?}");
        }
    }

    // The bound address, loopback names and the allow-list are served.
    for host in [
        bound.clone(),
        format!("localhost:{port}"),
        "localhost".to_owned(),
        "LOCALHOST".to_owned(),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        "scheduler.internal".to_owned(),
        format!("Scheduler.Internal:{port}"),
        "ops.example:8443".to_owned(),
    ] {
        for path in paths {
            let answer = get(addr, path, &[("Host", &host)]).await;
            assert_eq!(answer.status, 200, "Host {host} on {path}: {answer:?}");
        }
    }

    // A cross-origin page (another site, another local port, a sandboxed frame) is refused,
    // whatever its Host; the page's own origin and the allow-list are served.
    let own = format!("http://{bound}");
    for (origin, status) in [
        ("http://evil.example", 403),
        ("http://localhost:3000", 403),
        ("null", 403),
        ("https://127.0.0.1:1", 403),
        (own.as_str(), 200),
        ("https://ops.example:8443", 200),
    ] {
        for path in paths {
            let answer = get(addr, path, &[("Host", &bound), ("Origin", origin)]).await;
            assert_eq!(
                answer.status, status,
                "Origin {origin} on {path}: {answer:?}"
            );
        }
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_says_nosniff() {
    let node = start(|b| b);
    let addr = node.addr;
    ready(addr).await;
    let host = addr.to_string();
    for (path, headers, status) in [
        ("/api/tasks", vec![("Host", host.as_str())], 200),
        ("/metrics", vec![("Host", host.as_str())], 200),
        ("/healthz", vec![("Host", host.as_str())], 200),
        ("/openapi.json", vec![("Host", host.as_str())], 200),
        ("/api/runs/999999", vec![("Host", host.as_str())], 404),
        ("/no/such/route", vec![("Host", host.as_str())], 404),
        ("/api/tasks", vec![("Host", "evil.example")], 403),
    ] {
        let answer = get(addr, path, &headers).await;
        assert_eq!(answer.status, status, "{path}: {answer:?}");
        assert_eq!(
            answer.header("x-content-type-options"),
            Some("nosniff"),
            "{path}: {answer:?}"
        );
    }
    node.stop().await;
}

/// Whether the server has closed `stream` (a read returns end of file or an error) within
/// `wait`.
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // An error answer (408) before closing: keep reading to the close.
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_headers_a_byte_a_second_is_cut_off() {
    let node = start(|b| b);
    let addr = node.addr;
    ready(addr).await;
    let request = format!(
        "GET /api/tasks HTTP/1.1\r\nHost: {addr}\r\nX-Padding: {}\r\n\r\n",
        "a".repeat(200)
    );
    let mut slow = TcpStream::connect(addr).await.unwrap();
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let mut sent = 0;
    let mut cut = false;
    for byte in request.bytes() {
        if slow.write_all(&[byte]).await.is_err() {
            cut = true;
            break;
        }
        sent += 1;
        if closed_within(&mut slow, Duration::from_secs(1)).await {
            cut = true;
            break;
        }
        // While the slow client holds its connection, others are served.
        if sent % 5 == 0 {
            let host = addr.to_string();
            let answer = get(addr, "/healthz", &[("Host", &host)]).await;
            assert_eq!(answer.status, 200, "{answer:?}");
        }
    }
    assert!(
        cut,
        "the server kept a client that sent its headers a byte a second until all {} bytes \
         were sent",
        request.len()
    );
    assert!(sent < request.len(), "cut off before the headers ended");
    // A client that connected and sent nothing was cut off too (the same deadline).
    assert!(
        closed_within(&mut idle, Duration::from_secs(120)).await,
        "a silent connection is closed"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_refused_at_once() {
    let node = start(|b| b);
    let addr = node.addr;
    ready(addr).await;
    let host = addr.to_string();
    // Silent connections, as many as the cap allows and more.
    let cap = scheduler::admin::MAX_CONNECTIONS;
    let mut held = Vec::new();
    for _ in 0..cap + 4 {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    // One beyond the cap is answered 503 and closed without waiting for a request.
    let mut beyond = held.pop().unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), beyond.read_to_end(&mut raw))
        .await
        .expect("a connection beyond the cap is closed")
        .unwrap();
    let refused = parse(&raw);
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.body.contains("connections"), "{refused:?}");
    // The first one was served (it is cut off silent, later, without a 503).
    let mut first = held.remove(0);
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(120), first.read_to_end(&mut raw)).await;
    assert!(
        !String::from_utf8_lossy(&raw).contains("503"),
        "a connection within the cap is not refused"
    );
    // Once they go, the server serves again.
    drop(held);
    scheduler_tests::wait_until(Duration::from_secs(60), "served again", || async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        if stream.write_all(request.as_bytes()).await.is_err() {
            return false;
        }
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw).await;
        raw.starts_with(b"HTTP/1.1 200")
    })
    .await;
    node.stop().await;
}

/// A request still unfinished when the request timeout ends (its body stalls half-way, so its
/// handler waits for the rest) is answered 503 with the documented message, long before the
/// idle timeout would close its connection without a word. The timeout is a setting, here 1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_outlasting_the_request_timeout_is_answered_503() {
    const TOKEN: &str = "a-long-enough-admin-token";
    let node = start(|b| {
        b.admin_token(TOKEN).admin_limits(
            scheduler::admin::AdminLimits::default().request_timeout(Duration::from_secs(1)),
        )
    });
    let addr = node.addr;
    ready(addr).await;
    let body = r#"{"reason":"checking the request deadline"}"#;
    let head = format!(
        "POST /api/tasks/hardening.none/pause HTTP/1.1\r\nHost: {addr}\r\n\
         Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body.as_bytes()[..10]).await.unwrap();
    // The rest never comes. Without the deadline the handler would wait for it until the idle
    // timeout (60 s) closed the connection, unanswered.
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(45), stream.read_to_end(&mut raw)).await;
    assert!(!raw.is_empty(), "no answer within 45 s");
    let answer = parse(&raw);
    assert_eq!(answer.status, 503, "{answer:?}");
    let error: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(error["error"], "unavailable", "{answer:?}");
    assert_eq!(
        error["message"], "the request took longer than 1s and was stopped",
        "{answer:?}"
    );
    assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
    node.stop().await;
}

/// Never runs (yearly); its strip is walked from a dense schedule in the config.
#[task(name = "hardening.dense")]
async fn hardening_dense() {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticks_walked_off_the_async_threads_still_answer_alike_under_many_readers() {
    // Every second, but disabled: a long walk for a 200-tick window, and no runs.
    let doc = ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: vec![TaskConfig {
            name: "hardening.dense".into(),
            enabled: false,
            cron: "* * * * * *".into(),
            timezone: None,
            ..Default::default()
        }],
    };
    let node = start(|b| {
        b.registry(
            TaskRegistry::collect()
                .unwrap()
                .retain(|n| n == "hardening.dense"),
        )
        .config_document(doc)
    });
    let addr = node.addr;
    ready(addr).await;
    let host = addr.to_string();
    scheduler_tests::wait_until(Duration::from_secs(60), "the task's row", || async {
        get(addr, "/api/tasks", &[("Host", &host)])
            .await
            .body
            .contains("hardening.dense")
    })
    .await;
    let readers: Vec<_> = (0..24)
        .map(|_| {
            let host = host.clone();
            tokio::spawn(async move { get(addr, "/api/ticks?count=200", &[("Host", &host)]).await })
        })
        .collect();
    // Probes are not queued behind the readers.
    let probe = get(addr, "/healthz", &[("Host", &host)]).await;
    assert_eq!(probe.status, 200, "{probe:?}");
    let mut strips = Vec::new();
    for reader in readers {
        let answer = reader.await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
        let body = answer.body.trim_start_matches(|c: char| c != '{');
        let json: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {}", answer.body));
        let tasks = json["tasks"].as_array().unwrap().clone();
        assert_eq!(tasks.len(), 1, "{tasks:?}");
        assert_eq!(tasks[0]["task"], "hardening.dense");
        assert!(tasks[0]["complete"].is_boolean(), "{tasks:?}");
        // Every tick since the task was disabled, and only those, is skipped as disabled.
        let ticks = tasks[0]["ticks"].as_array().unwrap();
        assert!(ticks.len() <= 200, "{ticks:?}");
        assert!(
            ticks
                .iter()
                .all(|t| t["outcome"] == "skipped" && t["reason"] == "disabled"),
            "{ticks:?}"
        );
        strips.push(ticks.len());
    }
    assert_eq!(strips.len(), 24);
    node.stop().await;
}

/// Beyond loopback, the viewer token reads the API and `/metrics` and is refused every
/// mutation (403), which the operator token makes; a wrong token is refused (401), counted by
/// reason in `/metrics`, and logged once for its peer (never with the token), the repeats of the
/// same peer within the minute left out of the log but counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_token_only_reads_and_failed_logins_are_counted_and_logged() {
    const OPERATOR: &str = "operator-token-0123456789";
    const VIEWER: &str = "viewer-token-0123456789";
    const WRONG: &str = "wrong-token-SECRET-4417";
    let node = start(|b| {
        b.admin_addr("0.0.0.0:0".parse().unwrap())
            .admin_token(OPERATOR)
            .admin_viewer_token(VIEWER)
    });
    let addr = SocketAddr::from(([127, 0, 0, 1], node.addr.port()));
    let host = addr.to_string();
    let bearer = |token: &str| format!("Bearer {token}");
    let (operator, viewer, wrong) = (bearer(OPERATOR), bearer(VIEWER), bearer(WRONG));
    let with = |auth: &str| vec![("Host", host.clone()), ("Authorization", auth.to_owned())];
    let call = |method: &'static str, path: &'static str, headers: Vec<(&'static str, String)>| async move {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        request(addr, method, path, &headers).await
    };
    scheduler_tests::wait_until(Duration::from_secs(60), "the node is ready", || async {
        get(addr, "/readyz", &[("Host", &host)]).await.status == 200
    })
    .await;

    // Wrong tokens first: one line for this peer, the next two left out of the log.
    let mut peers = Vec::new();
    for _ in 0..3 {
        let (answer, peer) = call("GET", "/api/tasks", with(&wrong)).await;
        assert_eq!(answer.status, 401, "{answer:?}");
        peers.push(peer);
    }
    let lines = logged(&format!("peer={}", peers[0]));
    assert_eq!(lines.len(), 1, "one line for the first failure: {lines:#?}");
    assert!(lines[0].contains("WARN"), "{}", lines[0]);
    assert!(
        lines[0].contains("reason=\"wrong_token\"") || lines[0].contains("reason=wrong_token"),
        "{}",
        lines[0]
    );
    for peer in &peers[1..] {
        assert_eq!(
            logged(&format!("peer={peer}")),
            Vec::<String>::new(),
            "rate-limited"
        );
    }
    assert_eq!(
        logged("SECRET-4417"),
        Vec::<String>::new(),
        "the token is never logged"
    );

    // Reads: either token; without one, refused beyond loopback.
    for token in [&operator, &viewer] {
        for path in ["/api/tasks", "/metrics"] {
            let (answer, _) = call("GET", path, with(token)).await;
            assert_eq!(answer.status, 200, "{path}: {answer:?}");
        }
    }
    let (answer, _) = call("GET", "/metrics", vec![("Host", host.clone())]).await;
    assert_eq!(answer.status, 401, "{answer:?}");

    // Mutations: the operator's token only.
    let trigger = "/api/tasks/hardening.none/trigger";
    let (answer, _) = call("POST", trigger, with(&viewer)).await;
    assert_eq!(answer.status, 403, "{answer:?}");
    assert!(
        answer.body.contains("SCHEDULER_ADMIN_VIEWER_TOKEN"),
        "{answer:?}"
    );
    let (answer, _) = call("POST", trigger, with(&operator)).await;
    assert_eq!(answer.status, 404, "admitted, and no such task: {answer:?}");

    let (answer, _) = call("GET", "/metrics", with(&viewer)).await;
    for sample in [
        "scheduler_admin_auth_failures_total{reason=\"wrong_token\"} 3",
        "scheduler_admin_auth_failures_total{reason=\"missing\"} 1",
        "scheduler_admin_auth_failures_total{reason=\"viewer_token\"} 1",
    ] {
        assert!(
            answer.body.contains(sample),
            "{sample} in:\n{}",
            answer.body
        );
    }
    node.stop().await;
}
