//! Property tests of the admin API's bodies and queries, from outside: one real node (an SQLite
//! file, an operator token, an every-second task that bumps a counter) is sent generated JSON
//! (any value, raw bytes, and objects with the right field names and hostile values) on every
//! mutation, and generated query strings on every read. Every answer is a 2xx or a 4xx (never a
//! 5xx, never a dropped connection), every 4xx is the API's JSON error body, and afterwards the
//! node still answers `/readyz` and still runs its every-second task (judged by the handler's
//! own counter). Fixed regression cases beside: a query number too big for `u32` and a 10 MiB
//! body.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::store::SqliteStore;
use scheduler::{Scheduler, TaskRegistry, task};
use serde_json::{Value, json};

const TOKEN: &str = "props-operator-token-0123456789";
/// Cases per property: enough to meet each endpoint many times, few enough for a debug build.
const CASES: u32 = 96;

static TICKS: AtomicU64 = AtomicU64::new(0);

/// Every second: the node's own record that it still schedules.
#[task(name = "props.tick")]
async fn props_tick() {
    TICKS.fetch_add(1, Ordering::SeqCst);
}

/// Hourly, never run by its schedule here: what the mutations act on.
#[task(name = "props.target")]
async fn props_target() {}

struct Node {
    addr: SocketAddr,
    running: common::RunningNode,
    _dir: tempfile::TempDir,
}

fn start() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("scheduler.db"))
        .connect()
        .unwrap();
    let task = |name: &str, cron: &str| TaskConfig {
        name: name.into(),
        enabled: true,
        cron: cron.into(),
        ..Default::default()
    };
    let doc = ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: vec![
            task("props.tick", "* * * * * *"),
            task("props.target", "0 0 * * * *"),
        ],
    };
    let scheduler = Scheduler::builder()
        .store(Arc::new(store))
        .registry(
            TaskRegistry::collect()
                .unwrap()
                .retain(|n| n.starts_with("props.")),
        )
        .config_document(doc)
        .shutdown_timeout(Duration::from_secs(5))
        .admin_token(TOKEN)
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .build()
        .unwrap();
    let addr = scheduler.admin_addr().unwrap();
    Node {
        addr,
        running: common::start(scheduler),
        _dir: dir,
    }
}

impl Node {
    async fn stop(self) {
        self.running.stop().await;
    }
}

/// An answer: status, content type, body.
struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

async fn send(
    addr: SocketAddr,
    method: &str,
    path_and_query: &str,
    body: Option<Vec<u8>>,
) -> Answer {
    let client = reqwest::Client::new();
    let url = format!("http://{addr}{path_and_query}");
    let mut request = client
        .request(method.parse().unwrap(), &url)
        .bearer_auth(TOKEN)
        .timeout(Duration::from_secs(60));
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body);
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path_and_query}: no answer: {e}"));
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = response
        .text()
        .await
        .unwrap_or_else(|e| panic!("{method} {path_and_query}: body cut: {e}"));
    Answer {
        status,
        content_type,
        body,
    }
}

/// The judgement of one answer: a 2xx, or a 4xx with the API's JSON error body.
fn judge(what: &str, a: &Answer) -> Result<(), TestCaseError> {
    let shown: String = a.body.chars().take(400).collect();
    prop_assert!(
        (200..500).contains(&a.status),
        "{what}: answered {} {shown}",
        a.status
    );
    if a.status >= 400 {
        prop_assert!(
            a.content_type.starts_with("application/json"),
            "{what}: a {} in {:?}, not the API's JSON: {shown}",
            a.status,
            a.content_type
        );
        let v: Value = serde_json::from_str(&a.body)
            .map_err(|e| TestCaseError::fail(format!("{what}: {e}: {shown}")))?;
        prop_assert!(v["error"].is_string(), "{what}: no `error`: {shown}");
        prop_assert!(
            v["message"].as_str().is_some_and(|m| !m.trim().is_empty()),
            "{what}: no `message`: {shown}"
        );
        // It may quote what was sent, but escaped and cut: nothing for a terminal to obey,
        // no echo of a megabyte.
        let message = v["message"].as_str().unwrap();
        prop_assert!(
            !message.chars().any(char::is_control),
            "{what}: control characters in {message:?}"
        );
        prop_assert!(
            message.chars().count() <= 1000,
            "{what}: a message of {} characters: {shown}",
            message.chars().count()
        );
    }
    Ok(())
}

/// Percent-encodes everything but letters and digits.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Strings a careless or hostile user types: empty, blank, control characters, long, dates
/// out of any range, numbers as text.
fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("   ".to_owned()),
        Just("1970-01-01T00:00:00Z".to_owned()),
        Just("0000-01-01T00:00:00Z".to_owned()),
        Just("9999-12-31T23:59:59Z".to_owned()),
        Just("+275760-09-13T00:00:00Z".to_owned()),
        Just("-262144-01-01T00:00:00Z".to_owned()),
        Just("2026-02-30T25:61:61+99:99".to_owned()),
        Just("99999999999999999999999999".to_owned()),
        Just("-1".to_owned()),
        Just("1e308".to_owned()),
        Just("NaN".to_owned()),
        Just("now".to_owned()),
        Just("props.target".to_owned()),
        any::<String>(),
        "[\\x00-\\x1f\\x7f\u{202e}\u{feff}a-z]{0,40}",
        proptest::collection::vec(any::<char>(), 0..6000).prop_map(|c| c.into_iter().collect()),
    ]
}

/// Numbers at and beyond every edge, as JSON.
fn hostile_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(1)),
        Just(json!(u32::MAX)),
        Just(json!(u64::from(u32::MAX) + 1)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(1e308)),
        Just(json!(-1e308)),
        Just(json!(0.5)),
        Just(json!(10_000_000_000_000_000u64)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        hostile_number(),
        hostile_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map(hostile_string(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A hostile value for a field: a number, a string, or any value.
fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => hostile_number(),
        3 => hostile_string().prop_map(Value::String),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
        1 => any_json(),
    ]
}

/// Every mutation: method, path, and the body's field names (none: it reads no body).
const MUTATIONS: &[(&str, &str, &[&str])] = &[
    ("POST", "/api/tasks/props.target/trigger", &[]),
    (
        "POST",
        "/api/tasks/props.target/pause",
        &["reason", "until"],
    ),
    ("POST", "/api/tasks/props.target/resume", &[]),
    ("POST", "/api/runs/1/cancel", &[]),
    (
        "POST",
        "/api/tasks/props.target/backfill",
        &[
            "from",
            "to",
            "all",
            "dry_run",
            "max_runs",
            "concurrency",
            "pace_ms",
        ],
    ),
    ("POST", "/api/backfills/1/cancel", &[]),
    (
        "POST",
        "/api/tasks/props.target/snooze",
        &["reason", "until"],
    ),
    ("DELETE", "/api/tasks/props.target/snooze", &[]),
];

/// Every read and its query parameters.
const READS: &[(&str, &[&str])] = &[
    ("/api/tasks", &[]),
    ("/api/tasks/props.target", &["count", "runs"]),
    ("/api/ticks", &["task", "count"]),
    (
        "/api/runs",
        &[
            "task", "status", "trigger", "since", "until", "cursor", "limit",
        ],
    ),
    ("/api/runs/1", &[]),
    ("/api/backfills", &["task", "limit"]),
    ("/api/backfills/1", &[]),
    ("/api/nodes", &[]),
    ("/api/audit", &["cursor", "limit"]),
    ("/api/deliveries", &["limit"]),
    ("/api/incidents", &["state", "task", "limit"]),
    ("/api/snoozes", &[]),
    ("/api/config", &[]),
];

/// An object with some of `fields` (and sometimes one more), each a hostile value.
fn shaped_body(fields: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let names: Vec<&'static str> = if fields.is_empty() {
        vec!["x"]
    } else {
        fields.to_vec()
    };
    proptest::collection::vec((proptest::sample::select(names), hostile_value()), 0..8).prop_map(
        |pairs| Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
    )
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    })
}

fn readyz(rt: &tokio::runtime::Runtime, addr: SocketAddr) {
    rt.block_on(scheduler_tests::wait_until(
        Duration::from_secs(60),
        "the node is ready",
        || async move {
            reqwest::get(format!("http://{addr}/readyz"))
                .await
                .is_ok_and(|r| r.status() == 200)
        },
    ));
}

/// Waits for two more runs of the every-second task than it had made so far.
fn still_schedules(rt: &tokio::runtime::Runtime) {
    let before = TICKS.load(Ordering::SeqCst);
    rt.block_on(scheduler_tests::wait_until(
        Duration::from_secs(60),
        "two more runs of the every-second task",
        || async move { TICKS.load(Ordering::SeqCst) >= before + 2 },
    ));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn hostile_bodies_and_queries_get_a_2xx_or_a_json_4xx_and_the_node_keeps_scheduling() {
    let rt = runtime();
    let node = rt.block_on(async { start() });
    let addr = node.addr;
    readyz(&rt, addr);
    still_schedules(&rt);

    // Objects with the right field names and hostile values, on every mutation.
    let mutation = (0..MUTATIONS.len()).prop_flat_map(|i| (Just(i), shaped_body(MUTATIONS[i].2)));
    runner()
        .run(&mutation, |(i, body)| {
            let (method, path, _) = MUTATIONS[i];
            let bytes = serde_json::to_vec(&body).unwrap();
            let a = rt.block_on(send(addr, method, path, Some(bytes)));
            judge(&format!("{method} {path} {body}"), &a)
        })
        .unwrap();

    // Any JSON value, or bytes that are not JSON at all, or nesting far beyond any parser's.
    let raw = prop_oneof![
        any_json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        proptest::collection::vec(any::<u8>(), 0..2000),
        (1usize..20_000).prop_map(|n| "[".repeat(n).into_bytes()),
        (1usize..20_000).prop_map(|n| {
            let mut s = "{\"reason\":".repeat(n);
            s.push('1');
            s.into_bytes()
        }),
    ];
    runner()
        .run(&(0..MUTATIONS.len(), raw), |(i, bytes)| {
            let (method, path, _) = MUTATIONS[i];
            let a = rt.block_on(send(addr, method, path, Some(bytes.clone())));
            let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
            judge(&format!("{method} {path} {shown:?}"), &a)
        })
        .unwrap();

    // Query strings on every read: known names with hostile values, unknown names, repeats.
    let query = (0..READS.len()).prop_flat_map(|i| {
        let mut names: Vec<String> = READS[i].1.iter().map(|s| (*s).to_owned()).collect();
        names.push("limit".to_owned());
        let pair = (
            prop_oneof![4 => proptest::sample::select(names), 1 => hostile_string()],
            prop_oneof![
                hostile_number().prop_map(|n| n.to_string()),
                hostile_string(),
            ],
        );
        (Just(i), proptest::collection::vec(pair, 0..5))
    });
    runner()
        .run(&query, |(i, pairs)| {
            let (path, _) = READS[i];
            let q: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
                .collect();
            let path = format!("{path}?{}", q.join("&"));
            let a = rt.block_on(send(addr, "GET", &path, None));
            judge(&format!("GET {path}"), &a)
        })
        .unwrap();

    // Hostile path parameters: names and ids of any text, numbers beyond `i64`.
    let segment = prop_oneof![
        hostile_string(),
        hostile_number().prop_map(|n| n.to_string()),
    ];
    runner()
        .run(&(0..PATHS.len(), segment), |(i, segment)| {
            let (method, template) = PATHS[i];
            let path = template.replace("{}", &encode(&segment));
            let body = (method != "GET").then(|| br#"{"reason":"props","until":"2999-01-01T00:00:00Z","from":"2020-01-01T00:00:00Z","to":"2020-01-01T01:00:00Z","dry_run":true}"#.to_vec());
            let a = rt.block_on(send(addr, method, &path, body));
            judge(&format!("{method} {path}"), &a)
        })
        .unwrap();

    readyz(&rt, addr);
    still_schedules(&rt);
    rt.block_on(node.stop());
}

/// Every route with a path parameter, `{}` where it goes.
const PATHS: &[(&str, &str)] = &[
    ("GET", "/api/tasks/{}"),
    ("GET", "/api/runs/{}"),
    ("GET", "/api/backfills/{}"),
    ("POST", "/api/tasks/{}/trigger"),
    ("POST", "/api/tasks/{}/pause"),
    ("POST", "/api/tasks/{}/resume"),
    ("POST", "/api/tasks/{}/backfill"),
    ("POST", "/api/tasks/{}/snooze"),
    ("DELETE", "/api/tasks/{}/snooze"),
    ("POST", "/api/runs/{}/cancel"),
    ("POST", "/api/backfills/{}/cancel"),
];

/// Found by the property above: a number too big for `u32` in `/api/backfills`'s `limit` got
/// axum's plain-text 400. Every read's numbers answer the API's JSON error naming the field.
#[test]
fn a_query_number_too_big_for_u32_gets_the_json_error_naming_it() {
    let rt = runtime();
    let node = rt.block_on(async { start() });
    let addr = node.addr;
    readyz(&rt, addr);
    for path in [
        "/api/backfills?limit=99999999999",
        "/api/runs?limit=99999999999",
        "/api/audit?limit=-1",
        "/api/deliveries?limit=1.5",
        "/api/incidents?limit=99999999999",
        "/api/ticks?count=99999999999",
        "/api/tasks/props.target?count=99999999999",
    ] {
        let a = rt.block_on(send(addr, "GET", path, None));
        judge(&format!("GET {path}"), &a).unwrap();
        assert_eq!(a.status, 400, "GET {path}: {}", a.body);
        let field = path.rsplit_once('?').unwrap().1.split('=').next().unwrap();
        assert!(
            a.body.contains(field),
            "GET {path}: the error names `{field}`: {}",
            a.body
        );
    }
    rt.block_on(node.stop());
}

/// A 10 MiB body is refused with 413 and the API's JSON error, and the node goes on.
#[test]
fn a_10_mib_body_is_refused_413_and_the_node_goes_on() {
    let rt = runtime();
    let node = rt.block_on(async { start() });
    let addr = node.addr;
    readyz(&rt, addr);
    let reason = "x".repeat(10 << 20);
    let body = serde_json::to_vec(&json!({"reason": reason})).unwrap();
    for path in [
        "/api/tasks/props.target/pause",
        "/api/tasks/props.target/snooze",
        "/api/tasks/props.target/backfill",
    ] {
        let a = rt.block_on(send(addr, "POST", path, Some(body.clone())));
        judge(&format!("POST {path} (10 MiB)"), &a).unwrap();
        assert_eq!(a.status, 413, "POST {path}: {}", a.body);
    }
    readyz(&rt, addr);
    still_schedules(&rt);
    rt.block_on(node.stop());
}
