//! `HttpSource` against a real HTTP server on 127.0.0.1: conditional requests, status errors,
//! timeouts, garbage bodies, auth headers and content types.

mod config_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use config_support::doc_json;
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
/// `/moved` redirects to `/tasks`; `/elsewhere` redirects to the same server named `localhost`
/// (another host as far as the client can tell).
async fn start(served: Served) -> (String, Shared) {
    let state = Arc::new(Mutex::new(served));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let elsewhere = format!("http://localhost:{}/tasks", addr.port());
    let app = Router::new()
        .route("/tasks", get(serve))
        .route("/moved", get(|| async { Redirect::temporary("/tasks") }))
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

#[tokio::test]
async fn redirects_are_followed_only_within_the_host() {
    let (url, _state) = start(Served {
        required: vec![("x-api-key", "k3y")],
        ..json_served(1)
    })
    .await;
    let mut moved = HttpSource::builder(url.replace("/tasks", "/moved"))
        .header("X-Api-Key", "k3y")
        .build()
        .unwrap();
    let Fetched::Changed(raw) = moved.fetch().await.unwrap() else {
        panic!("a same-host redirect is followed");
    };
    assert_eq!(raw.text, doc_json(1));

    let mut elsewhere = HttpSource::builder(url.replace("/tasks", "/elsewhere"))
        .header("X-Api-Key", "k3y")
        .build()
        .unwrap();
    let err = elsewhere.fetch().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("redirect to another host (localhost) refused"),
        "{err}"
    );
}
