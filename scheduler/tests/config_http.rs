//! `HttpSource` against a real HTTP server on 127.0.0.1: conditional requests, status errors,
//! timeouts, garbage bodies, auth headers, content types, and redirects that must not carry
//! credentials to another origin.

mod config_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use config_support::{LogCapture, doc_json};
use scheduler::config::{
    ConfigError, ConfigFormat, ConfigSettings, ConfigSource, ConfigWatcher, Fetched, HttpSource,
    PollOutcome, source_from_location,
};

/// What the test server serves, and what it saw.
#[derive(Default)]
struct Served {
    body: String,
    content_type: Option<&'static str>,
    etag: Option<String>,
    last_modified: Option<&'static str>,
    /// Answer this status instead of the document.
    status: Option<StatusCode>,
    /// Sleep this long before answering.
    delay: Option<Duration>,
    /// Headers that must be present (else 401).
    required: Vec<(&'static str, &'static str)>,
    /// `(If-None-Match, If-Modified-Since)` of every request, and the status answered.
    seen: Vec<(Option<String>, Option<String>, u16)>,
}

type Shared = Arc<Mutex<Served>>;

async fn serve(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let delay = state.lock().unwrap().delay;
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let mut served = state.lock().unwrap();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let if_none_match = header("if-none-match");
    let if_modified_since = header("if-modified-since");
    let authorized = served
        .required
        .iter()
        .all(|(name, value)| header(name).as_deref() == Some(*value));
    let not_modified = match (&served.etag, &if_none_match, served.last_modified) {
        (Some(etag), Some(inm), _) => etag == inm,
        (None, _, Some(lm)) => if_modified_since.as_deref() == Some(lm),
        _ => false,
    };
    let status = if !authorized {
        StatusCode::UNAUTHORIZED
    } else if let Some(status) = served.status {
        status
    } else if not_modified {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    served
        .seen
        .push((if_none_match, if_modified_since, status.as_u16()));
    if status != StatusCode::OK {
        return status.into_response();
    }
    let mut response = served.body.clone().into_response();
    let h = response.headers_mut();
    h.remove(header::CONTENT_TYPE);
    if let Some(ct) = served.content_type {
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    if let Some(etag) = &served.etag {
        h.insert(header::ETAG, HeaderValue::from_str(etag).unwrap());
    }
    if let Some(lm) = served.last_modified {
        h.insert(header::LAST_MODIFIED, HeaderValue::from_static(lm));
    }
    response
}

/// Starts a server on 127.0.0.1:0 serving `served` at `/tasks`; returns its URL and state.
///
/// `/moved` redirects to `/tasks` (and `/moved-twice` to `/moved`), `/loop` to itself;
/// `/elsewhere` redirects to the same server named `localhost` (another host as far as the
/// client can tell).
async fn start(served: Served) -> (String, Shared) {
    let state = Arc::new(Mutex::new(served));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let elsewhere = format!("http://localhost:{}/tasks", addr.port());
    let app = Router::new()
        .route("/tasks", get(serve))
        .route("/moved", get(|| async { Redirect::temporary("/tasks") }))
        .route(
            "/moved-twice",
            get(|| async { Redirect::temporary("/moved") }),
        )
        .route("/loop", get(|| async { Redirect::temporary("/loop") }))
        .route(
            "/elsewhere",
            get(move || async move { Redirect::temporary(&elsewhere) }),
        )
        .with_state(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/tasks"), state)
}

fn json_served(version: i64) -> Served {
    Served {
        body: doc_json(version),
        content_type: Some("application/json"),
        etag: Some(format!("\"v{version}\"")),
        ..Served::default()
    }
}

fn changed_version(outcome: PollOutcome) -> Option<i64> {
    match outcome {
        PollOutcome::Changed(doc) => doc.version,
        other => panic!("expected a new document, got {other:?}"),
    }
}

#[tokio::test]
async fn etag_is_sent_back_and_304_is_unchanged() {
    let (url, state) = start(json_served(1)).await;
    let mut source = HttpSource::builder(&url).build().unwrap();

    let Fetched::Changed(raw) = source.fetch().await.unwrap() else {
        panic!("first fetch returns the document");
    };
    assert_eq!(raw.text, doc_json(1));
    assert_eq!(raw.format, Some(ConfigFormat::Json));
    assert_eq!(raw.revision.as_deref(), Some("\"v1\""));

    assert_eq!(source.fetch().await.unwrap(), Fetched::Unchanged);
    {
        let served = state.lock().unwrap();
        assert_eq!(served.seen[0], (None, None, 200));
        assert_eq!(served.seen[1], (Some("\"v1\"".to_owned()), None, 304));
    }

    {
        let mut served = state.lock().unwrap();
        let seen = std::mem::take(&mut served.seen);
        *served = Served {
            seen,
            ..json_served(2)
        };
    }
    let Fetched::Changed(raw) = source.fetch().await.unwrap() else {
        panic!("a new ETag means new content");
    };
    assert_eq!(raw.text, doc_json(2));
    assert_eq!(source.fetch().await.unwrap(), Fetched::Unchanged);
    assert_eq!(
        state.lock().unwrap().seen.last().unwrap().0.as_deref(),
        Some("\"v2\"")
    );
}

#[tokio::test]
async fn last_modified_is_sent_back_as_if_modified_since() {
    let lm = "Mon, 30 Nov 2026 10:00:00 GMT";
    let (url, state) = start(Served {
        body: doc_json(1),
        content_type: Some("application/json"),
        last_modified: Some(lm),
        ..Served::default()
    })
    .await;
    let mut source = HttpSource::builder(&url).build().unwrap();
    assert!(matches!(source.fetch().await.unwrap(), Fetched::Changed(_)));
    assert_eq!(source.fetch().await.unwrap(), Fetched::Unchanged);
    let seen = &state.lock().unwrap().seen;
    assert_eq!(seen[1], (None, Some(lm.to_owned()), 304));
}

#[tokio::test]
async fn server_error_names_the_status_and_the_watcher_keeps_the_last_good_document() {
    let (url, state) = start(json_served(1)).await;
    let mut watcher = ConfigWatcher::new(HttpSource::builder(&url).build().unwrap());
    assert_eq!(changed_version(watcher.poll_once().await), Some(1));

    state.lock().unwrap().status = Some(StatusCode::INTERNAL_SERVER_ERROR);
    for _ in 0..2 {
        match watcher.poll_once().await {
            PollOutcome::Failed(e @ ConfigError::HttpStatus { status: 500, .. }) => {
                assert!(e.to_string().contains("500"), "{e}");
                assert!(e.to_string().contains(&url), "{e}");
            }
            other => panic!("expected a 500 error, got {other:?}"),
        }
        assert_eq!(watcher.current().unwrap().version, Some(1));
    }

    state.lock().unwrap().status = None;
    // The server still has v1, so it answers 304.
    assert!(matches!(watcher.poll_once().await, PollOutcome::Unchanged));
    assert_eq!(state.lock().unwrap().seen.last().unwrap().2, 304);
    assert_eq!(watcher.current().unwrap().version, Some(1));
}

#[tokio::test]
async fn a_slow_response_is_a_timeout_error() {
    let (url, _state) = start(Served {
        delay: Some(Duration::from_secs(5)),
        ..json_served(1)
    })
    .await;
    let mut source = HttpSource::builder(&url)
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(30), source.fetch())
        .await
        .expect("the source's own timeout fires first")
        .unwrap_err();
    assert!(
        matches!(err, ConfigError::Timeout { timeout, .. } if timeout == Duration::from_millis(300)),
        "{err:?}"
    );
    assert!(err.to_string().contains("timed out after 300ms"), "{err}");
}

#[tokio::test]
async fn a_garbage_body_is_a_parse_error_naming_the_url() {
    let (url, state) = start(Served {
        body: "{\"tasks\": [oops".to_owned(),
        content_type: Some("application/json"),
        etag: Some("\"bad\"".to_owned()),
        ..Served::default()
    })
    .await;
    let mut watcher = ConfigWatcher::new(HttpSource::builder(&url).build().unwrap());
    match watcher.poll_once().await {
        PollOutcome::Failed(e) => {
            assert!(e.is_parse(), "{e}");
            assert!(e.to_string().contains(&url), "{e}");
            assert!(e.to_string().contains("line 1"), "{e}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    assert!(watcher.current().is_none());
    assert!(
        watcher
            .last_error()
            .unwrap()
            .contains("invalid JSON config")
    );

    // A 500 in between, then the server is back with the same broken text (304): the broken
    // text is the problem again.
    state.lock().unwrap().status = Some(StatusCode::INTERNAL_SERVER_ERROR);
    assert!(matches!(watcher.poll_once().await, PollOutcome::Failed(_)));
    assert!(
        watcher
            .last_error()
            .unwrap()
            .contains("500 Internal Server Error")
    );
    state.lock().unwrap().status = None;
    assert!(matches!(watcher.poll_once().await, PollOutcome::Unchanged));
    assert!(
        watcher
            .last_error()
            .unwrap()
            .contains("invalid JSON config")
    );

    // Fixed on the server: picked up, then kept over a later HTML error page.
    *state.lock().unwrap() = json_served(4);
    assert_eq!(changed_version(watcher.poll_once().await), Some(4));
    assert_eq!(watcher.last_error(), None);
    *state.lock().unwrap() = Served {
        body: "<html><body>maintenance</body></html>".to_owned(),
        content_type: Some("text/html"),
        ..Served::default()
    };
    assert!(matches!(
        watcher.poll_once().await,
        PollOutcome::Failed(ConfigError::Parse { .. })
    ));
    assert_eq!(watcher.current().unwrap().version, Some(4));
}

#[tokio::test]
async fn bearer_token_and_headers_are_sent() {
    let (url, _state) = start(Served {
        required: vec![("authorization", "Bearer s3cret"), ("x-env", "prod")],
        ..json_served(1)
    })
    .await;

    let mut anonymous = HttpSource::builder(&url).build().unwrap();
    let err = anonymous.fetch().await.unwrap_err();
    assert!(
        matches!(err, ConfigError::HttpStatus { status: 401, .. }),
        "{err}"
    );

    let mut source = HttpSource::builder(&url)
        .bearer_token("s3cret")
        .header("X-Env", "prod")
        .build()
        .unwrap();
    assert!(matches!(source.fetch().await.unwrap(), Fetched::Changed(_)));
    assert!(!format!("{source:?}").contains("s3cret"));

    // The same through the environment contract.
    let env = [
        ("SCHEDULER_CONFIG", url.as_str()),
        ("SCHEDULER_CONFIG_TOKEN", "s3cret"),
        ("SCHEDULER_CONFIG_HEADERS", "X-Env=prod"),
    ];
    let settings = ConfigSettings::from_lookup(|name| {
        env.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    })
    .unwrap()
    .unwrap();
    let mut watcher = settings.watcher().unwrap();
    assert_eq!(changed_version(watcher.poll_once().await), Some(1));
}

#[tokio::test]
async fn credentials_in_the_url_are_sent_as_basic_auth_and_never_shown() {
    let (url, _state) = start(Served {
        required: vec![("authorization", "Basic ZGVwbG95OnBhNTU=")],
        ..json_served(1)
    })
    .await;
    let with_credentials = url.replace("http://", "http://deploy:pa55@");
    let mut source = source_from_location(&with_credentials).unwrap();
    assert!(matches!(source.fetch().await.unwrap(), Fetched::Changed(_)));
    assert!(!source.describe().contains("pa55"), "{}", source.describe());

    // Errors do not leak them either (a port nothing listens on).
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let mut source = source_from_location(&format!("http://deploy:pa55@{closed}/tasks")).unwrap();
    let err = source.fetch().await.unwrap_err();
    assert!(matches!(err, ConfigError::Fetch { .. }), "{err:?}");
    assert!(!err.to_string().contains("pa55"), "{err}");
    assert!(!format!("{err:?}").contains("pa55"), "{err:?}");
}

#[tokio::test]
async fn content_type_decides_the_format() {
    let toml = "version = 9\n\n[[tasks]]\nname = \"purgeSessions\"\nenabled = true\ncron = \"0 0 3 * * *\"\n";
    let (url, state) = start(Served {
        body: toml.to_owned(),
        content_type: Some("application/toml"),
        ..Served::default()
    })
    .await;
    let mut watcher = ConfigWatcher::new(HttpSource::builder(&url).build().unwrap());
    assert_eq!(changed_version(watcher.poll_once().await), Some(9));

    // Declared JSON: parsed as JSON, so this TOML text is refused.
    state.lock().unwrap().content_type = Some("application/json; charset=utf-8");
    match watcher.poll_once().await {
        PollOutcome::Failed(e) => assert!(e.to_string().contains("invalid JSON config"), "{e}"),
        other => panic!("expected a JSON parse error, got {other:?}"),
    }

    // A generic type: sniffed.
    state.lock().unwrap().content_type = Some("text/plain");
    state.lock().unwrap().body = "version: 10\ntasks: []\n".to_owned();
    assert_eq!(changed_version(watcher.poll_once().await), Some(10));

    // An explicit format beats the content type.
    state.lock().unwrap().content_type = Some("application/json");
    let mut source = HttpSource::builder(&url)
        .format(ConfigFormat::Yaml)
        .build()
        .unwrap();
    let Fetched::Changed(raw) = source.fetch().await.unwrap() else {
        panic!("first fetch returns the document");
    };
    assert_eq!(raw.format, Some(ConfigFormat::Yaml));
}

/// Every request a recording server received: its path and query, and its headers.
type Received = Arc<Mutex<Vec<(String, HeaderMap)>>>;

/// Starts a server on 127.0.0.1:0 (so on a port of its own) that records every request and
/// answers it with `doc_json(1)`, or with a redirect to `redirect_to`. Returns `http://addr`.
async fn start_recorder(redirect_to: Option<String>) -> (String, Received) {
    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let record = received.clone();
    let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        record.lock().unwrap().push((uri.to_string(), headers));
        let redirect_to = redirect_to.clone();
        async move {
            match redirect_to {
                Some(location) => Redirect::temporary(&location).into_response(),
                None => doc_json(1).into_response(),
            }
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), received)
}

fn header_of<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn a_same_origin_redirect_is_followed_with_the_credentials() {
    let (url, state) = start(Served {
        required: vec![("authorization", "Bearer s3cret"), ("x-api-key", "k3y")],
        ..json_served(1)
    })
    .await;
    for path in ["/moved", "/moved-twice"] {
        let mut moved = HttpSource::builder(url.replace("/tasks", path))
            .bearer_token("s3cret")
            .header("X-Api-Key", "k3y")
            .build()
            .unwrap();
        let Fetched::Changed(raw) = moved.fetch().await.unwrap() else {
            panic!("a same-origin redirect is followed");
        };
        assert_eq!(raw.text, doc_json(1));
    }
    // `/tasks` answers 401 without both, so they arrived at the final path.
    let statuses: Vec<u16> = state.lock().unwrap().seen.iter().map(|s| s.2).collect();
    assert_eq!(statuses, [200, 200]);

    let mut looping = HttpSource::builder(url.replace("/tasks", "/loop"))
        .build()
        .unwrap();
    let err = looping.fetch().await.unwrap_err();
    assert!(err.to_string().contains("more than 5 redirects"), "{err}");
}

#[tokio::test]
async fn a_redirect_to_another_port_is_refused_and_gets_no_credentials() {
    let (other, other_received) = start_recorder(None).await;
    // Credentials in the redirect target itself must not show in the error either.
    let target = format!(
        "{}/tasks?token=t4rget&env=prod",
        other.replace("http://", "http://user:l3ak@")
    );
    let (first, first_received) = start_recorder(Some(target)).await;
    let mut source = HttpSource::builder(format!("{first}/tasks"))
        .bearer_token("s3cret")
        .header("X-Api-Key", "k3y")
        .build()
        .unwrap();

    let err = source.fetch().await.unwrap_err();
    assert!(matches!(err, ConfigError::Fetch { .. }), "{err:?}");
    let message = err.to_string();
    let shown_target = format!(
        "{}/tasks?token=***&env=prod",
        other.replace("http://", "http://***@")
    );
    assert!(
        message.contains(&format!(
            "redirected to {shown_target}, which is not {first}"
        )),
        "{message}"
    );
    assert!(
        message.contains("point SCHEDULER_CONFIG at the final URL"),
        "{message}"
    );
    for secret in ["s3cret", "k3y", "l3ak", "t4rget"] {
        assert!(!message.contains(secret), "{message}");
        assert!(!format!("{err:?}").contains(secret), "{err:?}");
    }

    // The configured origin got the credentials; the other port got nothing at all.
    {
        let first_received = first_received.lock().unwrap();
        assert_eq!(first_received.len(), 1);
        assert_eq!(
            header_of(&first_received[0].1, "authorization"),
            Some("Bearer s3cret")
        );
        assert_eq!(header_of(&first_received[0].1, "x-api-key"), Some("k3y"));
    }
    assert!(other_received.lock().unwrap().is_empty());

    // The recorder does see credentials that reach it: asked directly, it records them.
    let mut direct = HttpSource::builder(format!("{other}/tasks"))
        .bearer_token("s3cret")
        .header("X-Api-Key", "k3y")
        .build()
        .unwrap();
    assert!(matches!(direct.fetch().await.unwrap(), Fetched::Changed(_)));
    let other_received = other_received.lock().unwrap();
    assert_eq!(other_received.len(), 1);
    assert_eq!(other_received[0].0, "/tasks");
    assert_eq!(
        header_of(&other_received[0].1, "authorization"),
        Some("Bearer s3cret")
    );
    assert_eq!(header_of(&other_received[0].1, "x-api-key"), Some("k3y"));
}

#[tokio::test]
async fn a_redirect_to_another_host_name_is_refused() {
    let (url, state) = start(json_served(1)).await;
    let mut elsewhere = HttpSource::builder(url.replace("/tasks", "/elsewhere"))
        .header("X-Api-Key", "k3y")
        .build()
        .unwrap();
    let err = elsewhere.fetch().await.unwrap_err();
    let localhost = url.replace("127.0.0.1", "localhost");
    assert!(
        err.to_string()
            .contains(&format!("the server redirected to {localhost}")),
        "{err}"
    );
    // `/tasks` was never asked, under either name.
    assert!(state.lock().unwrap().seen.is_empty());
}

#[test]
fn credentials_over_plain_http_to_a_remote_host_are_warned_about_at_build() {
    let logs = LogCapture::start();
    let warning = "travel unencrypted";
    HttpSource::builder("http://config.example.invalid/tasks.json")
        .bearer_token("s3cret")
        .build()
        .unwrap();
    assert_eq!(logs.count(warning), 1, "{}", logs.text());
    assert!(
        logs.text()
            .contains("source=http://config.example.invalid/tasks.json"),
        "{}",
        logs.text()
    );
    HttpSource::builder("http://deploy:pa55@10.1.2.3:8080/tasks.json")
        .build()
        .unwrap();
    assert_eq!(logs.count(warning), 2, "{}", logs.text());

    // Encrypted, loopback, or nothing to protect: no warning.
    HttpSource::builder("https://config.example.invalid/tasks.json")
        .bearer_token("s3cret")
        .header("X-Env", "prod")
        .build()
        .unwrap();
    HttpSource::builder("http://127.0.0.1:8080/tasks.json")
        .bearer_token("s3cret")
        .build()
        .unwrap();
    HttpSource::builder("http://config.example.invalid/tasks.json")
        .build()
        .unwrap();
    assert_eq!(logs.count(warning), 2, "{}", logs.text());
    assert!(!logs.text().contains("s3cret") && !logs.text().contains("pa55"));
}
