//! Alerts reach the channels teams live in, each as its vendor documents it: real nodes on each
//! store send to real receivers on 127.0.0.1 (HTTP servers standing in for Slack, Feishu,
//! DingTalk, WeCom and a Standard Webhooks endpoint, and a real SMTP server, aiosmtpd from
//! PyPI, with STARTTLS on a certificate made here). Each receiver checks signatures and shapes
//! on its own, with its own HMAC, from the vendors' documentation, never with the scheduler's
//! code; the test judges by what the receivers recorded, the outbox and `/api/deliveries`.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::*;
use hmac::{Hmac, KeyInit, Mac};
use scheduler::channels::{Channel, ChannelKind, Channels, Route, Secret};
use scheduler::{TaskContext, task};
use sha2::Sha256;

on_both_backends!(
    threads = 2;
    every_vendor_gets_its_documented_shape_signed_and_the_mail_arrives_over_starttls,
    owners_route_a_failure_to_two_channels_and_a_recovering_endpoint_gets_each_alert_once,
    subscribers_see_each_task_s_owners_and_labels_or_the_default_owners,
    refusals_for_good_are_given_up_once_and_rate_limits_and_outages_are_retried,
    a_huge_answer_is_read_no_further_than_its_start_on_every_http_channel,
    a_mail_server_without_starttls_is_given_up_at_once_and_named,
    a_robot_hook_that_is_not_there_is_given_up_at_once_and_named,
    reminders_and_resolutions_name_task_incident_and_opening_on_every_channel,
);

const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const FEISHU_SECRET: &str = "feishu-demo-secret";
const DINGTALK_SECRET: &str = "SECdingtalk-demo-secret";
const SMTP_USER: &str = "alerts@example.com";
const SMTP_PASSWORD: &str = "smtp-password-xyz";

#[task(name = "chan.fails")]
async fn chan_fails(ctx: TaskContext) -> Result<(), std::io::Error> {
    let _guard = recorder(&ctx).enter(&ctx);
    Err(std::io::Error::other(
        "the upstream refused: 503\nsecond line of the error\nthird line",
    ))
}

/// Fails while its test's [`Flaky`] switch is on.
#[task(name = "chan.flaky")]
async fn chan_flaky(ctx: TaskContext) -> Result<(), std::io::Error> {
    let failing = ctx
        .state::<Arc<Flaky>>()
        .is_ok_and(|f| f.0.load(std::sync::atomic::Ordering::SeqCst));
    if failing {
        return Err(std::io::Error::other(
            "the upstream refused: ```\n# not a heading",
        ));
    }
    Ok(())
}

/// Whether `chan.flaky` fails.
#[derive(Default)]
struct Flaky(std::sync::atomic::AtomicBool);

#[task(name = "chan.other")]
async fn chan_other() {}

#[task(name = "refusal.a")]
async fn refusal_a() -> Result<(), std::io::Error> {
    Err(std::io::Error::other("a broke"))
}

#[task(name = "refusal.b")]
async fn refusal_b() -> Result<(), std::io::Error> {
    Err(std::io::Error::other("b broke"))
}

// ---- receivers ------------------------------------------------------------------------------

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Request {
    /// Path and query.
    uri: String,
    headers: HashMap<String, String>,
    body: String,
    /// Whether the answer meant "taken" (2xx, and a zero code for the chat robots).
    accepted: bool,
    /// When it arrived.
    at: std::time::Instant,
}

impl Request {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// What a receiver answers to its `n`-th request (from 0): status, body, whether that is a
/// taking.
type Answer = Arc<dyn Fn(usize) -> (u16, String, bool) + Send + Sync>;

#[derive(Default)]
struct Receiver {
    got: Mutex<Vec<Request>>,
}

impl Receiver {
    fn all(&self) -> Vec<Request> {
        self.got.lock().unwrap().clone()
    }

    fn accepted(&self) -> Vec<Request> {
        self.all().into_iter().filter(|r| r.accepted).collect()
    }
}

/// An HTTP receiver on a free port of 127.0.0.1; every path is taken, `answer` decides (a
/// 429 says `Retry-After: 2`, as Slack's rate limit does).
async fn receiver(answer: Answer) -> (String, Arc<Receiver>, tokio::task::JoinHandle<()>) {
    let got = Arc::new(Receiver::default());
    let sink = Arc::clone(&got);
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: String| {
            let sink = Arc::clone(&sink);
            let answer = Arc::clone(&answer);
            async move {
                let mut got = sink.got.lock().unwrap();
                let (status, text, accepted) = answer(got.len());
                got.push(Request {
                    uri: uri.to_string(),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
                        .collect(),
                    body,
                    accepted,
                    at: std::time::Instant::now(),
                });
                let retry_after = (status == 429).then_some([("retry-after", "2")]);
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    axum::response::AppendHeaders(retry_after.into_iter().flatten()),
                    text,
                )
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, got, handle)
}

fn always(status: u16, body: &'static str) -> Answer {
    Arc::new(move |_| (status, body.to_owned(), (200..300).contains(&status)))
}

/// base64(HMAC-SHA256(key, message)), as the vendors' samples compute it.
fn hmac_b64(key: &[u8], message: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
    mac.update(message);
    STANDARD.encode(mac.finalize().into_bytes())
}

/// Standard Webhooks: `v1,` + base64(HMAC-SHA256(base64-decoded whsec key, id.timestamp.body)).
fn standard_webhooks_valid(r: &Request) -> bool {
    let key = STANDARD.decode(WHSEC.trim_start_matches("whsec_")).unwrap();
    let id = &r.headers["webhook-id"];
    let ts = &r.headers["webhook-timestamp"];
    let expected = format!(
        "v1,{}",
        hmac_b64(&key, format!("{id}.{ts}.{}", r.body).as_bytes())
    );
    r.headers["webhook-signature"]
        .split(' ')
        .any(|s| s == expected)
}

/// Feishu: `sign` = base64(HMAC-SHA256(key = "timestamp\nsecret", message = "")), timestamp in
/// seconds, within an hour of now.
fn feishu_valid(body: &serde_json::Value) -> bool {
    let Some(ts) = body["timestamp"].as_str() else {
        return false;
    };
    let fresh = ts
        .parse::<i64>()
        .is_ok_and(|t| (chrono::Utc::now().timestamp() - t).abs() < 3600);
    fresh
        && body["sign"].as_str()
            == Some(&hmac_b64(format!("{ts}\n{FEISHU_SECRET}").as_bytes(), b""))
}

/// DingTalk: `&timestamp=<ms>&sign=<urlencoded base64(HMAC-SHA256(key = secret, message =
/// "timestamp\nsecret"))>` on the robot's URL, within an hour of now.
fn dingtalk_valid(uri: &str) -> bool {
    let url = reqwest::Url::parse(&format!("http://x{uri}")).unwrap();
    let q: HashMap<String, String> = url.query_pairs().into_owned().collect();
    let (Some(ts), Some(sign)) = (q.get("timestamp"), q.get("sign")) else {
        return false;
    };
    let fresh = ts
        .parse::<i64>()
        .is_ok_and(|t| (chrono::Utc::now().timestamp_millis() - t).abs() < 3_600_000);
    fresh
        && q.get("access_token").map(String::as_str) == Some("dt-token")
        && *sign
            == hmac_b64(
                DINGTALK_SECRET.as_bytes(),
                format!("{ts}\n{DINGTALK_SECRET}").as_bytes(),
            )
}

// ---- the SMTP server --------------------------------------------------------------------------

/// aiosmtpd's Python, installed into a venv under the target directory on first use (as
/// scripts/test does beforehand).
fn aiosmtpd_python() -> std::path::PathBuf {
    static SETUP: Mutex<()> = Mutex::new(());
    let _once = SETUP.lock().unwrap_or_else(|p| p.into_inner());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = std::env::var_os("SCHEDULER_AIOSMTPD_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target/aiosmtpd/venv"));
    let python = venv.join("bin/python");
    let ready = std::process::Command::new(&python)
        .args(["-c", "import aiosmtpd"])
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        let made = std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 (with venv) is needed for the SMTP receiver");
        assert!(made.success(), "python3 -m venv {venv:?}");
        let installed = std::process::Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "aiosmtpd==1.4.6"])
            .status()
            .expect("pip in the venv");
        assert!(installed.success(), "pip install aiosmtpd");
    }
    python
}

struct Smtp {
    port: u16,
    ca_pem: String,
    mails: Arc<Mutex<Vec<serde_json::Value>>>,
    child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl Smtp {
    /// aiosmtpd on a free port of 127.0.0.1, STARTTLS with a certificate for 127.0.0.1 signed
    /// by a CA made here.
    async fn start() -> Smtp {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        use tokio::io::AsyncBufReadExt;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "channels test CA");
        let ca_key = KeyPair::generate().unwrap();
        let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca_params, ca_key);
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cert_file = dir.path().join("server.crt");
        let key_file = dir.path().join("server.key");
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("smtp_receiver.py");
        let mut child = tokio::process::Command::new(aiosmtpd_python())
            .arg(script)
            .arg(port.to_string())
            .arg(&cert_file)
            .arg(&key_file)
            .args([SMTP_USER, SMTP_PASSWORD])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the SMTP receiver");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the SMTP receiver starts")
            .unwrap();
        assert_eq!(first.as_deref(), Some("ready"));
        let mails = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&mails);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mail) = serde_json::from_str(&line) {
                    sink.lock().unwrap().push(mail);
                }
            }
        });
        Smtp {
            port,
            ca_pem,
            mails,
            child,
            _dir: dir,
        }
    }

    fn mails(&self) -> Vec<serde_json::Value> {
        self.mails.lock().unwrap().clone()
    }
}

// ---- behaviours -----------------------------------------------------------------------------

fn owned_entry() -> scheduler::config::TaskConfig {
    scheduler::config::TaskConfig {
        timezone: Some("Asia/Shanghai".into()),
        owners: vec!["alice@example.com".into(), "13800138000".into()],
        labels: BTreeMap::from([("team".into(), "ads".into())]),
        ..entry("chan.fails", "0 0 1 1 *")
    }
}

fn url(base: &str, path: &str) -> reqwest::Url {
    format!("{base}{path}").parse().unwrap()
}

/// One failing task with owners, labels and a zone; one channel of each kind, no routes: every
/// receiver gets the `run.failed`, each in its vendor's documented shape and signature, naming
/// the task, what happened, when in the task's zone, the node, the error's first lines, the
/// owners and a link to the run; the mail arrives over STARTTLS after a login, to the
/// channel's recipient and the owner's address; `/api/deliveries` names every channel.
async fn every_vendor_gets_its_documented_shape_signed_and_the_mail_arrives_over_starttls(
    db: &TestDb,
) {
    let (hook, webhook_got, s1) = receiver(always(204, "")).await;
    let (slack_base, slack_got, s2) = receiver(always(200, "ok")).await;
    let (feishu_base, feishu_got, s3) =
        receiver(always(200, r#"{"code":0,"msg":"success","data":{}}"#)).await;
    let (dingtalk_base, dingtalk_got, s4) =
        receiver(always(200, r#"{"errcode":0,"errmsg":"ok"}"#)).await;
    let (wecom_base, wecom_got, s5) = receiver(always(200, r#"{"errcode":0,"errmsg":"ok"}"#)).await;
    let mut smtp = Smtp::start().await;

    // The channels file, as an operator writes it (secrets from the environment).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("channels.toml");
    let mut f = std::fs::File::create(&file).unwrap();
    write!(
        f,
        r#"
[[channels]]
name = "hook"
kind = "webhook"
url = "{hook}/hook"
secret = "{WHSEC}"

[[channels]]
name = "slack"
kind = "slack"
url = "{slack_base}/services/T000/B000/SlackPathSecret"

[[channels]]
name = "feishu"
kind = "feishu"
url = "{feishu_base}/open-apis/bot/v2/hook/feishu-hook-id"
secret = "env:TEST_FEISHU_SECRET"

[[channels]]
name = "dingtalk"
kind = "dingtalk"
url = "{dingtalk_base}/robot/send?access_token=dt-token"
secret = "{DINGTALK_SECRET}"

[[channels]]
name = "wecom"
kind = "wecom"
url = "{wecom_base}/cgi-bin/webhook/send?key=wecom-key"

[[channels]]
name = "mail"
kind = "email"
host = "127.0.0.1"
port = {port}
username = "{SMTP_USER}"
password = "env:TEST_SMTP_PASSWORD"
from = "Scheduler <{SMTP_USER}>"
to = ["ops@example.com"]
ca_file = "{ca}"
"#,
        port = smtp.port,
        ca = dir.path().join("ca.pem").display(),
    )
    .unwrap();
    std::fs::write(dir.path().join("ca.pem"), &smtp.ca_pem).unwrap();
    let env = |name: &str| match name {
        "TEST_FEISHU_SECRET" => Some(FEISHU_SECRET.to_owned()),
        "TEST_SMTP_PASSWORD" => Some(SMTP_PASSWORD.to_owned()),
        _ => None,
    };
    let text = std::fs::read_to_string(&file).unwrap();
    let channels = Channels::parse(
        &text,
        scheduler::config::ConfigFormat::Toml,
        "channels.toml",
        &env,
    )
    .unwrap();
    let debug = format!("{channels:?}");
    for secret in [
        "SlackPathSecret",
        "feishu-hook-id",
        "dt-token",
        "wecom-key",
        FEISHU_SECRET,
        DINGTALK_SECRET,
        SMTP_PASSWORD,
    ] {
        assert!(!debug.contains(secret), "{secret} in {debug}");
    }

    let n = start(
        node(db, "a", tasks("chan.fails"))
            .config_document(doc(vec![owned_entry()]))
            .channels(channels)
            .public_url("https://scheduler.example.com/")
            .state(Arc::new(Recorder::default()))
            .build()
            .unwrap(),
    );
    trigger_all_now(db, 1).await;
    wait_until(
        Duration::from_secs(120),
        "every channel took the failure",
        || async {
            !webhook_got.accepted().is_empty()
                && !slack_got.accepted().is_empty()
                && !feishu_got.accepted().is_empty()
                && !dingtalk_got.accepted().is_empty()
                && !wecom_got.accepted().is_empty()
                && !smtp.mails().is_empty()
        },
    )
    .await;
    // Every channel in the delivery log, by name (recorded after the receivers answered).
    let delivered = || async {
        let mut names: Vec<String> = db
            .api()
            .deliveries(50)
            .await
            .unwrap()
            .into_iter()
            .filter(|d| d.kind == "run.failed" && d.error.is_none())
            .map(|d| d.channel)
            .collect();
        names.sort();
        names.dedup();
        names
    };
    wait_until(
        Duration::from_secs(60),
        "every delivery recorded",
        || async { delivered().await.len() == 6 },
    )
    .await;
    assert_eq!(
        delivered().await,
        ["dingtalk", "feishu", "hook", "mail", "slack", "wecom"]
    );
    n.stop().await;
    let run = db.runs(Some("chan.fails")).await.remove(0);
    let run_link = format!("https://scheduler.example.com/#/run/{}", run.id);

    // What every message says, in its own words.
    let says_it_all = |text: &str, who: &str| {
        for needle in [
            "chan.fails",
            "failed",
            "(Asia/Shanghai)",
            "the upstream refused: 503",
            "second line of the error",
            "alice@example.com",
            "team=ads",
            run_link.as_str(),
        ] {
            assert!(text.contains(needle), "{who}: `{needle}` missing in {text}");
        }
        // The tick in Shanghai: 8 hours ahead of UTC.
        let local = run
            .started_at
            .unwrap_or(run.scheduled_at)
            .with_timezone(&chrono_tz::Asia::Shanghai)
            .format("%Y-%m-%d")
            .to_string();
        assert!(text.contains(&local), "{who}: the date in its zone: {text}");
    };

    // Standard Webhooks: signed, `{type, timestamp, data}`, data with owners and labels.
    let w = &webhook_got.accepted()[0];
    assert!(standard_webhooks_valid(w), "{w:?}");
    assert_eq!(w.headers["content-type"], "application/json");
    let body = w.json();
    assert_eq!(body["type"], "run.failed");
    assert_eq!(body["data"]["run"]["task"], "chan.fails");
    assert_eq!(
        body["data"]["owners"],
        serde_json::json!(["alice@example.com", "13800138000"])
    );
    assert_eq!(body["data"]["labels"]["team"], "ads");
    assert_eq!(body["data"]["timezone"], "Asia/Shanghai");

    // Slack incoming webhook: `text` (the fallback) and Block Kit `blocks`.
    let s = slack_got.accepted()[0].clone();
    assert_eq!(s.uri, "/services/T000/B000/SlackPathSecret");
    let body = s.json();
    assert!(
        body["text"].as_str().unwrap().contains("chan.fails"),
        "{body}"
    );
    let blocks = body["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "header");
    assert_eq!(blocks[0]["text"]["type"], "plain_text");
    for b in blocks {
        assert!(
            ["header", "section"].contains(&b["type"].as_str().unwrap()),
            "{b}"
        );
    }
    says_it_all(&s.body.replace("\\n", "\n"), "slack");

    // Feishu custom bot: signed body, msg_type text, content.text.
    let f = feishu_got.accepted()[0].clone();
    assert_eq!(f.uri, "/open-apis/bot/v2/hook/feishu-hook-id");
    let body = f.json();
    assert!(feishu_valid(&body), "{body}");
    assert_eq!(body["msg_type"], "text");
    says_it_all(body["content"]["text"].as_str().unwrap(), "feishu");

    // DingTalk custom robot: signed URL, markdown body, the owner's mobile @-mentioned.
    let d = dingtalk_got.accepted()[0].clone();
    assert!(dingtalk_valid(&d.uri), "{}", d.uri);
    let body = d.json();
    assert_eq!(body["msgtype"], "markdown");
    assert!(
        body["markdown"]["title"]
            .as_str()
            .unwrap()
            .contains("chan.fails")
    );
    let text = body["markdown"]["text"].as_str().unwrap();
    says_it_all(text, "dingtalk");
    assert_eq!(body["at"]["atMobiles"], serde_json::json!(["13800138000"]));
    assert!(text.contains("@13800138000"), "{text}");

    // WeCom group robot: markdown content within 4,096 bytes.
    let c = wecom_got.accepted()[0].clone();
    assert_eq!(c.uri, "/cgi-bin/webhook/send?key=wecom-key");
    let body = c.json();
    assert_eq!(body["msgtype"], "markdown");
    let content = body["markdown"]["content"].as_str().unwrap();
    assert!(content.len() <= 4096);
    says_it_all(content, "wecom");

    // The mail: over STARTTLS, after the login, to the channel's and the owner's address.
    let mail = smtp.mails().remove(0);
    assert_eq!(mail["tls"], true, "{mail}");
    assert_eq!(mail["login"], SMTP_USER, "{mail}");
    assert_eq!(mail["mail_from"], SMTP_USER);
    let mut to: Vec<&str> = mail["rcpt_tos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    to.sort();
    assert_eq!(
        to,
        ["alice@example.com", "ops@example.com"],
        "the mobile is no address"
    );
    assert_eq!(mail["subject"], "[scheduler] chan.fails failed");
    let message_id = mail["message_id"].as_str().unwrap_or_default();
    assert!(
        message_id.starts_with("<scheduler.") && message_id.ends_with("@example.com>"),
        "{mail}"
    );
    assert!(
        chrono::DateTime::parse_from_rfc2822(mail["date"].as_str().unwrap_or_default()).is_ok(),
        "{mail}"
    );
    says_it_all(mail["body"].as_str().unwrap(), "mail");

    let _ = smtp.child.kill().await;
    for s in [s1, s2, s3, s4, s5] {
        s.abort();
    }
}

/// Routes by owner: a task owned by alice that fails three times in a row (one incident: the
/// repeats are folded into it) goes to her two channels (a Standard Webhooks endpoint and a
/// Feishu bot), not to bob's. Both of hers fail at first (503s; a 200 whose body is Feishu's
/// refusal code), then recover: after retries from the outbox, each receives the incident's
/// alert exactly once (the webhook's by `webhook-id`, Feishu's by run), and the failures of
/// one never held back the other.
async fn owners_route_a_failure_to_two_channels_and_a_recovering_endpoint_gets_each_alert_once(
    db: &TestDb,
) {
    // The webhook endpoint refuses its first three requests; Feishu answers its first two with
    // 200 and a refusal code, as Feishu does for a bad signature.
    let (hook, hook_got, s1) = receiver(Arc::new(|n| {
        if n < 3 {
            (503, "busy".to_owned(), false)
        } else {
            (200, String::new(), true)
        }
    }))
    .await;
    let (feishu_base, feishu_got, s2) = receiver(Arc::new(|n| {
        if n < 2 {
            (
                200,
                r#"{"code":9499,"msg":"Bad Request"}"#.to_owned(),
                false,
            )
        } else {
            (200, r#"{"code":0,"msg":"success"}"#.to_owned(), true)
        }
    }))
    .await;
    let (bob_base, bob_got, s3) = receiver(always(200, "ok")).await;

    let webhook = scheduler::webhook::WebhookSettings::new(&format!("{hook}/hook"), WHSEC).unwrap();
    let mut channels = Channels::new()
        .with(Channel::new(
            "alice-feishu",
            ChannelKind::Feishu {
                url: url(&feishu_base, "/open-apis/bot/v2/hook/x"),
                secret: Some(Secret::new(FEISHU_SECRET)),
            },
        ))
        .unwrap()
        .with(Channel::new(
            "bob-slack",
            ChannelKind::Slack {
                url: url(&bob_base, "/services/bob"),
            },
        ))
        .unwrap()
        .with(Channel::webhook(&webhook))
        .unwrap();
    let mut alice = Route::default();
    alice.owners = vec!["alice@example.com".into()];
    alice.channels = vec!["alice-feishu".into(), "webhook".into()];
    let mut bob = Route::default();
    bob.owners = vec!["bob@example.com".into()];
    bob.channels = vec!["bob-slack".into()];
    channels = channels.route(alice).unwrap().route(bob).unwrap();
    // Retries in test time: the same backoff (times 3 each), from 200 ms.
    channels.retry_base = Duration::from_millis(200);

    let config = doc(vec![
        owned_entry(),
        scheduler::config::TaskConfig {
            owners: vec!["bob@example.com".into()],
            ..entry("chan.other", "0 0 1 1 *")
        },
    ]);
    let rec = Arc::new(Recorder::default());
    let builder = node_with(db, "a", tasks("chan."), config, &rec).channels(channels);
    let n = started(db, builder, &["chan.fails", "chan.other"]).await;
    // Three failures, one after another.
    for i in 1..=3usize {
        db.set_next_run(Some("chan.fails"), Some(chrono::Utc::now()))
            .await;
        db.api().notify().await.unwrap();
        wait_until(Duration::from_secs(60), "the task failed again", || async {
            db.runs(Some("chan.fails")).await.len() >= i
                && db
                    .runs(Some("chan.fails"))
                    .await
                    .iter()
                    .all(|r| r.status != scheduler::testing::store::RunStatus::Running)
        })
        .await;
    }
    let runs: Vec<i64> = db
        .runs(Some("chan.fails"))
        .await
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(runs.len(), 3, "one run per trigger");
    wait_until(
        Duration::from_secs(120),
        "both channels took the incident's alert",
        || async {
            let outbox = db.outbox().await;
            outbox.len() == 2 && outbox.iter().all(|(_, state)| state == "delivered")
        },
    )
    .await;
    let deliveries = db.api().deliveries(100).await.unwrap();
    n.stop().await;

    // The retries happened: the receivers refused, then took.
    assert_eq!(hook_got.all().iter().filter(|r| !r.accepted).count(), 3);
    assert_eq!(feishu_got.all().iter().filter(|r| !r.accepted).count(), 2);

    // The webhook: every signed `webhook-id` taken exactly once, one per failure.
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut hook_runs = Vec::new();
    for r in hook_got.accepted() {
        assert!(standard_webhooks_valid(&r), "{r:?}");
        *ids.entry(r.headers["webhook-id"].clone()).or_default() += 1;
        hook_runs.push(r.json()["data"]["run"]["run_id"].as_i64().unwrap());
    }
    assert_eq!(ids.len(), 1, "one incident, one alert: {ids:?}");
    assert!(ids.values().all(|n| *n == 1), "{ids:?}");
    hook_runs.sort();

    // Feishu: every failure taken exactly once, signed.
    let mut feishu_runs: Vec<i64> = feishu_got
        .accepted()
        .iter()
        .map(|r| {
            let body = r.json();
            assert!(feishu_valid(&body), "{body}");
            let text = body["content"]["text"].as_str().unwrap().to_owned();
            // Without a public URL there is no link: the run is named by its id.
            runs.iter()
                .find(|id| text.lines().any(|l| l == format!("Run: {id}")))
                .copied()
                .unwrap_or_else(|| panic!("the run is not named in {text}"))
        })
        .collect();
    feishu_runs.sort();
    // The incident's alert is the first failure's.
    let first = *runs.iter().min().unwrap();
    assert_eq!(hook_runs, [first]);
    assert_eq!(feishu_runs, [first]);

    // Bob's channel got nothing of alice's task.
    assert!(bob_got.all().is_empty(), "{:?}", bob_got.all());
    // The delivery log names the channels, and shows the refusals.
    assert!(
        deliveries.iter().any(|d| d.channel == "alice-feishu"
            && d.error.as_deref().is_some_and(|e| e.contains("9499")))
    );
    assert!(
        deliveries
            .iter()
            .any(|d| d.channel == "webhook" && d.status == Some(503))
    );
    assert!(deliveries.iter().all(|d| d.channel != "bob-slack"));
    for s in [s1, s2, s3] {
        s.abort();
    }
}

/// The in-process event stream carries the same owners and labels as the alerts: a task whose
/// entry names owners and labels is seen with them (and its zone), a task whose entry names
/// none with the node's default owners; one task's events share one copy of its tags.
async fn subscribers_see_each_task_s_owners_and_labels_or_the_default_owners(db: &TestDb) {
    let scheduler = node(db, "a", tasks("chan."))
        .config_document(doc(vec![owned_entry(), entry("chan.other", "0 0 1 1 *")]))
        .default_owners(["oncall@example.com"])
        .state(Arc::new(Recorder::default()))
        .build()
        .unwrap();
    let mut events = scheduler.subscribe();
    let n = start(scheduler);
    trigger_all_now(db, 2).await;
    let mut seen: Vec<scheduler::events::Event> = Vec::new();
    let ended = |seen: &[scheduler::events::Event], task: &str| {
        seen.iter()
            .any(|e| e.task() == Some(task) && matches!(e.kind(), "run.failed" | "run.succeeded"))
    };
    tokio::time::timeout(Duration::from_secs(120), async {
        while !(ended(&seen, "chan.fails") && ended(&seen, "chan.other")) {
            seen.push(events.recv().await.expect("the node is running"));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("both runs ended within 120 s: {seen:#?}"));
    n.stop().await;

    let of = |task: &str| -> Vec<&scheduler::events::Event> {
        seen.iter().filter(|e| e.task() == Some(task)).collect()
    };
    let owned = of("chan.fails");
    assert!(owned.len() >= 2, "started and failed: {owned:#?}");
    for e in &owned {
        assert_eq!(e.owners(), ["alice@example.com", "13800138000"], "{e:?}");
        assert!(!e.tags.default_owners);
        assert_eq!(e.labels()["team"], "ads");
        assert_eq!(e.tags.timezone, "Asia/Shanghai");
        assert!(Arc::ptr_eq(&e.tags, &owned[0].tags), "shared, not copied");
    }
    let plain = of("chan.other");
    assert!(plain.len() >= 2, "started and succeeded: {plain:#?}");
    for e in plain {
        assert_eq!(e.owners(), ["oncall@example.com"], "{e:?}");
        assert!(e.tags.default_owners);
        assert!(e.labels().is_empty());
    }
}

/// Each vendor's refusals as its documentation gives them, from real receivers: two failing
/// tasks raise two alerts (two incidents) to seven channels. Slack's 400 `invalid_payload`,
/// 404 `no_service` and 410 `channel_is_archived` and Feishu's 200 with code 19021 (bad
/// signature) are given up at the first attempt, say so in `/api/deliveries`, and leave the
/// channel on (the second alert is still sent to it); a 429 with `Retry-After` is tried again
/// no sooner than it says, a 503 and WeCom's rate-limit code 45009 are retried until taken.
async fn refusals_for_good_are_given_up_once_and_rate_limits_and_outages_are_retried(db: &TestDb) {
    let first_then_ok = |status: u16, body: &'static str| -> Answer {
        Arc::new(move |n| {
            if n == 0 {
                (status, body.to_owned(), false)
            } else {
                (200, r#"{"errcode":0,"errmsg":"ok"}"#.to_owned(), true)
            }
        })
    };
    let refusals = [
        ("slack-payload", always(400, "invalid_payload")),
        ("slack-hook", always(404, "no_service")),
        ("slack-archived", always(410, "channel_is_archived")),
        ("slack-busy", first_then_ok(429, "rate_limited")),
        ("slack-down", first_then_ok(503, "")),
    ];
    let mut got: BTreeMap<&str, Arc<Receiver>> = BTreeMap::new();
    let mut servers = Vec::new();
    let mut channels = Channels::new();
    for (name, answer) in refusals {
        let (base, receiver, server) = receiver(answer).await;
        channels = channels
            .with(Channel::new(
                name,
                ChannelKind::Slack {
                    url: url(&base, "/services/T000/B000/x"),
                },
            ))
            .unwrap();
        got.insert(name, receiver);
        servers.push(server);
    }
    let (feishu_base, feishu_got, server) = receiver(always(
        200,
        r#"{"code":19021,"msg":"sign match fail or timestamp is not within one hour from current time"}"#,
    ))
    .await;
    servers.push(server);
    got.insert("feishu-sign", feishu_got);
    let (wecom_base, wecom_got, server) = receiver(first_then_ok(
        200,
        r#"{"errcode":45009,"errmsg":"api freq out of limit"}"#,
    ))
    .await;
    servers.push(server);
    got.insert("wecom-limit", wecom_got);
    channels = channels
        .with(Channel::new(
            "feishu-sign",
            ChannelKind::Feishu {
                url: url(&feishu_base, "/open-apis/bot/v2/hook/x"),
                secret: Some(Secret::new(FEISHU_SECRET)),
            },
        ))
        .unwrap()
        .with(Channel::new(
            "wecom-limit",
            ChannelKind::WeCom {
                url: url(&wecom_base, "/cgi-bin/webhook/send?key=k"),
            },
        ))
        .unwrap();
    channels.retry_base = Duration::from_millis(200);
    let n = start(
        node(db, "a", tasks("refusal."))
            .config_document(doc(vec![
                entry("refusal.a", "0 0 1 1 *"),
                entry("refusal.b", "0 0 1 1 *"),
            ]))
            .channels(channels)
            .build()
            .unwrap(),
    );
    trigger_all_now(db, 2).await;
    // Two alerts to seven channels; every row settled (taken or given up).
    wait_until(
        Duration::from_secs(120),
        "every delivery taken or given up",
        || async {
            let outbox = db.outbox().await;
            outbox.len() == 14
                && outbox
                    .iter()
                    .all(|(_, state)| state == "delivered" || state == "failed")
        },
    )
    .await;
    let deliveries = db.api().deliveries(200).await.unwrap();
    let outbox = db.outbox().await;
    n.stop().await;

    for name in [
        "slack-payload",
        "slack-hook",
        "slack-archived",
        "feishu-sign",
    ] {
        let requests = got[name].all();
        assert_eq!(
            requests.len(),
            2,
            "{name}: one attempt per alert, none retried, the channel still on: {requests:#?}"
        );
        let logged: Vec<_> = deliveries.iter().filter(|d| d.channel == name).collect();
        assert_eq!(logged.len(), 2, "{name}: {logged:#?}");
        for d in logged {
            assert_eq!(d.attempt, 1, "{d:?}");
            let error = d.error.as_deref().unwrap_or_default();
            assert!(error.contains("given up, not retried"), "{name}: {error}");
        }
    }
    for (name, word) in [
        ("slack-payload", "invalid_payload"),
        ("slack-hook", "no_service"),
        ("slack-archived", "channel_is_archived"),
        ("feishu-sign", "19021"),
    ] {
        assert!(
            deliveries
                .iter()
                .any(|d| d.channel == name
                    && d.error.as_deref().unwrap_or_default().contains(word)),
            "{name}: the delivery log names `{word}`"
        );
    }
    assert_eq!(
        outbox.iter().filter(|(_, state)| state == "failed").count(),
        8,
        "the four refusing channels' rows given up: {outbox:?}"
    );
    // Retried until taken: each alert exactly once.
    for name in ["slack-busy", "slack-down", "wecom-limit"] {
        let requests = got[name].all();
        assert_eq!(
            requests.len(),
            3,
            "{name}: one refusal, then both taken: {requests:#?}"
        );
        assert_eq!(got[name].accepted().len(), 2, "{name}");
        let mut bodies: Vec<&str> = requests
            .iter()
            .filter(|r| r.accepted)
            .map(|r| r.body.as_str())
            .collect();
        bodies.sort();
        bodies.dedup();
        assert_eq!(bodies.len(), 2, "{name}: each alert once");
    }
    // The 429's `Retry-After: 2` was honoured: its message came back no sooner.
    let busy = got["slack-busy"].all();
    let retry = busy[1..]
        .iter()
        .find(|r| r.body == busy[0].body)
        .expect("the rate-limited message was sent again");
    assert!(
        retry.at - busy[0].at >= Duration::from_millis(1900),
        "retried {:?} after a 429 that said 2 s",
        retry.at - busy[0].at
    );
    for s in servers {
        s.abort();
    }
}

// ---- bounded answers, refusals of configuration, complete messages ---------------------------

/// A raw HTTP endpoint on 127.0.0.1 answering every request `503` with a body of `mib` MiB of
/// generated bytes (written 64 KiB at a time, never held whole), until the client stops
/// reading. Records, per connection, how many body bytes it could write.
async fn huge_answer(mib: usize) -> (String, Arc<Mutex<Vec<usize>>>, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let written = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&written);
    let handle = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let record = Arc::clone(&record);
            tokio::spawn(async move {
                // The request: headers, then its body (by Content-Length).
                let mut request = Vec::new();
                let mut buf = [0u8; 8192];
                let body_len = loop {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        break end + 4 + len;
                    }
                };
                while request.len() < body_len {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                }
                let total = mib * 1024 * 1024;
                let head = format!(
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n\
                     content-length: {total}\r\nconnection: close\r\n\r\n"
                );
                let mut sent = 0usize;
                if socket.write_all(head.as_bytes()).await.is_ok() {
                    let piece: Vec<u8> = (0..64 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
                    while sent < total {
                        let n = piece.len().min(total - sent);
                        if socket.write_all(&piece[..n]).await.is_err() {
                            break;
                        }
                        sent += n;
                    }
                }
                record.lock().unwrap().push(sent);
            });
        }
    });
    (url, written, handle)
}

/// The peak resident memory of this process (`VmHWM`), for a measurement by hand.
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .unwrap_or("VmHWM: unknown")
        .to_owned()
}

/// An endpoint answering with a huge body (64 MiB here; `SCHEDULER_TEST_HUGE_ANSWER_MIB` for a
/// measurement by hand) is read no further than its start, on a Standard Webhooks channel and
/// on each chat channel: every delivery is recorded with the answer's status and an excerpt
/// of it, and the endpoint could not write even half its body before the node hung up.
async fn a_huge_answer_is_read_no_further_than_its_start_on_every_http_channel(db: &TestDb) {
    let mib: usize = std::env::var("SCHEDULER_TEST_HUGE_ANSWER_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let (base, written, server) = huge_answer(mib).await;
    let webhook = scheduler::webhook::WebhookSettings::new(&format!("{base}/hook"), WHSEC).unwrap();
    let mut channels = Channels::new().with(Channel::webhook(&webhook)).unwrap();
    for (name, kind) in [
        (
            "slack",
            ChannelKind::Slack {
                url: url(&base, "/services/T/B/x"),
            },
        ),
        (
            "feishu",
            ChannelKind::Feishu {
                url: url(&base, "/open-apis/bot/v2/hook/x"),
                secret: None,
            },
        ),
        (
            "dingtalk",
            ChannelKind::DingTalk {
                url: url(&base, "/robot/send?access_token=t"),
                secret: None,
            },
        ),
        (
            "wecom",
            ChannelKind::WeCom {
                url: url(&base, "/cgi-bin/webhook/send?key=k"),
            },
        ),
    ] {
        channels = channels.with(Channel::new(name, kind)).unwrap();
    }
    // One attempt each in this test: no retry falls due while it runs.
    channels.retry_base = Duration::from_secs(3600);
    let n = start(
        node(db, "a", tasks("refusal.a"))
            .config_document(doc(vec![entry("refusal.a", "0 0 1 1 *")]))
            .channels(channels)
            .build()
            .unwrap(),
    );
    trigger_all_now(db, 1).await;
    let recorded = || async {
        db.api()
            .deliveries(50)
            .await
            .unwrap()
            .into_iter()
            .filter(|d| d.kind == "run.failed")
            .collect::<Vec<_>>()
    };
    wait_until(
        Duration::from_secs(120),
        "every channel's delivery recorded",
        || async { recorded().await.len() == 5 },
    )
    .await;
    wait_until(
        Duration::from_secs(60),
        "the endpoint done with every connection",
        || async { written.lock().unwrap().len() == 5 },
    )
    .await;
    let deliveries = recorded().await;
    n.stop().await;
    server.abort();
    for d in &deliveries {
        assert_eq!(d.status, Some(503), "{d:?}");
        let error = d.error.as_deref().unwrap_or_default();
        assert!(error.contains("answered 503: abcdefgh"), "{d:?}");
        assert!(error.len() < 1024, "an excerpt only: {} bytes", error.len());
    }
    let total = mib * 1024 * 1024;
    for sent in written.lock().unwrap().iter() {
        assert!(
            *sent < total / 2,
            "the node read the answer on: {sent} of {total} bytes written"
        );
    }
    eprintln!(
        "huge answer of {mib} MiB x 5: peak of this test process {}",
        peak_rss()
    );
}

/// A plain SMTP server on 127.0.0.1 that offers no STARTTLS (EHLO lists AUTH only); counts
/// its connections.
async fn smtp_without_starttls() -> (
    u16,
    Arc<std::sync::atomic::AtomicUsize>,
    tokio::task::JoinHandle<()>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&connections);
    let handle = tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut lines = tokio::io::BufReader::new(read).lines();
                if write
                    .write_all(b"220 plain.example ESMTP\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                while let Ok(Some(line)) = lines.next_line().await {
                    let verb = line.get(..4).unwrap_or("").to_ascii_uppercase();
                    let answer: &[u8] = match verb.as_str() {
                        "EHLO" => b"250-plain.example\r\n250-AUTH PLAIN LOGIN\r\n250 8BITMIME\r\n",
                        "HELO" | "RSET" | "NOOP" => b"250 ok\r\n",
                        "QUIT" => {
                            let _ = write.write_all(b"221 bye\r\n").await;
                            return;
                        }
                        _ => b"530 5.7.0 nothing here\r\n",
                    };
                    if write.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, connections, handle)
}

/// An e-mail channel (STARTTLS, the default) pointed at a server that offers no STARTTLS: a
/// configuration fault, not an outage. The delivery is given up at its first attempt, and the
/// delivery log says why, naming the server; the server saw one connection.
async fn a_mail_server_without_starttls_is_given_up_at_once_and_named(db: &TestDb) {
    let (port, connections, server) = smtp_without_starttls().await;
    let text = format!(
        "[[channels]]\nname = \"mail\"\nkind = \"email\"\nhost = \"127.0.0.1\"\nport = {port}\n\
         from = \"alerts@example.com\"\nto = [\"ops@example.com\"]\n"
    );
    let mut channels = Channels::parse(
        &text,
        scheduler::config::ConfigFormat::Toml,
        "c.toml",
        &|_| None,
    )
    .unwrap();
    // Retries in test time, were it retried.
    channels.retry_base = Duration::from_millis(200);
    let n = start(
        node(db, "a", tasks("refusal.a"))
            .config_document(doc(vec![entry("refusal.a", "0 0 1 1 *")]))
            .channels(channels)
            .build()
            .unwrap(),
    );
    trigger_all_now(db, 1).await;
    wait_until(Duration::from_secs(60), "the delivery given up", || async {
        let outbox = db.outbox().await;
        !outbox.is_empty() && outbox.iter().all(|(_, state)| state == "failed")
    })
    .await;
    let outbox = db.outbox().await;
    let deliveries = db.api().deliveries(50).await.unwrap();
    n.stop().await;
    server.abort();
    assert_eq!(outbox, [(1, "failed".to_owned())], "one attempt");
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    let error = deliveries[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("does not offer STARTTLS"), "{error}");
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
    assert!(error.contains("not retried"), "{error}");
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// A task fails every second until its incident has been reminded on every channel, then
/// succeeds: each channel (Standard Webhooks, Slack, Feishu, DingTalk, WeCom, e-mail) receives
/// the reminder and the resolution, and each of those messages names the task, the incident's
/// kind (`run.failed`) and when it opened (the time the receivers' own webhook record gives);
/// the error's backticks stay inside their code block; every mail has a Message-ID and a Date.
async fn reminders_and_resolutions_name_task_incident_and_opening_on_every_channel(db: &TestDb) {
    let (base, got, server) = receiver(Arc::new(|_| {
        (
            200,
            r#"{"code":0,"errcode":0,"errmsg":"ok"}"#.to_owned(),
            true,
        )
    }))
    .await;
    let smtp = Smtp::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), &smtp.ca_pem).unwrap();
    let text = format!(
        r#"
[[channels]]
name = "hook"
kind = "webhook"
url = "{base}/hook"
secret = "{WHSEC}"

[[channels]]
name = "slack"
kind = "slack"
url = "{base}/slack"

[[channels]]
name = "feishu"
kind = "feishu"
url = "{base}/feishu"

[[channels]]
name = "dingtalk"
kind = "dingtalk"
url = "{base}/dingtalk?access_token=t"

[[channels]]
name = "wecom"
kind = "wecom"
url = "{base}/wecom?key=k"

[[channels]]
name = "mail"
kind = "email"
host = "127.0.0.1"
port = {port}
username = "{SMTP_USER}"
password = "{SMTP_PASSWORD}"
from = "Scheduler <{SMTP_USER}>"
to = ["ops@example.com"]
ca_file = "{ca}"
"#,
        port = smtp.port,
        ca = dir.path().join("ca.pem").display(),
    );
    let channels = Channels::parse(
        &text,
        scheduler::config::ConfigFormat::Toml,
        "c.toml",
        &|_| None,
    )
    .unwrap();
    let flaky = Arc::new(Flaky::default());
    flaky.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut flaky_entry = entry("chan.flaky", "* * * * * *");
    flaky_entry.sla =
        Some(serde_json::from_value(serde_json::json!({"remind_every": "1s"})).unwrap());
    let n = start(
        node(db, "a", tasks("chan.flaky"))
            .config_document(doc(vec![flaky_entry]))
            .channels(channels)
            .missed_grace(Duration::from_secs(3600))
            .state(Arc::clone(&flaky))
            .build()
            .unwrap(),
    );
    // Each receiver's messages of one event type (the text people read, or the webhook body).
    let texts = |path: &str, kind: &str| -> Vec<String> {
        got.all()
            .into_iter()
            .filter(|r| r.uri.starts_with(path))
            .map(|r| {
                let body = r.json();
                match path {
                    "/slack" => body.to_string().replace("\\n", "\n"),
                    "/feishu" => body["content"]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    "/dingtalk" => body["markdown"]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    "/wecom" => body["markdown"]["content"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    _ => r.body.clone(),
                }
            })
            .filter(|t| t.contains(kind))
            .collect()
    };
    let mails = |kind: &str| -> Vec<serde_json::Value> {
        smtp.mails()
            .into_iter()
            .filter(|m| m["body"].as_str().unwrap_or_default().contains(kind))
            .collect()
    };
    let paths = ["/hook", "/slack", "/feishu", "/dingtalk", "/wecom"];
    let everywhere =
        |kind: &str| paths.iter().all(|p| !texts(p, kind).is_empty()) && !mails(kind).is_empty();
    wait_until(
        Duration::from_secs(120),
        "a reminder on every channel",
        || async { everywhere("incident.reminder") },
    )
    .await;
    flaky.0.store(false, std::sync::atomic::Ordering::SeqCst);
    wait_until(
        Duration::from_secs(120),
        "the resolution on every channel",
        || async { everywhere("incident.resolved") },
    )
    .await;
    n.stop().await;
    server.abort();

    // When the incident opened, as the webhook's own record has it, in the task's zone (UTC).
    let reminder: serde_json::Value =
        serde_json::from_str(&texts("/hook", "incident.reminder")[0]).unwrap();
    assert_eq!(reminder["data"]["incident"]["task"], "chan.flaky");
    let opened: chrono::DateTime<chrono::Utc> = reminder["data"]["incident"]["opened_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let opened = opened.format("%Y-%m-%d %H:%M:%S (UTC)").to_string();
    for kind in ["incident.reminder", "incident.resolved"] {
        for path in &paths[1..] {
            let text = &texts(path, kind)[0];
            for needle in ["chan.flaky", "run.failed", opened.as_str()] {
                assert!(
                    text.contains(needle),
                    "{path} {kind}: `{needle}` missing in {text}"
                );
            }
        }
        let mail = &mails(kind)[0];
        let body = mail["body"].as_str().unwrap();
        for needle in ["chan.flaky", "run.failed", opened.as_str()] {
            assert!(
                body.contains(needle),
                "mail {kind}: `{needle}` missing in {body}"
            );
        }
        assert!(
            mail["subject"].as_str().unwrap().contains("chan.flaky"),
            "{mail}"
        );
        assert!(
            mail["message_id"]
                .as_str()
                .unwrap()
                .starts_with("<scheduler."),
            "{mail}"
        );
        assert!(!mail["date"].as_str().unwrap().is_empty(), "{mail}");
    }
    // The failure's error kept inside its code block on the markdown channels.
    for path in ["/dingtalk", "/wecom"] {
        let text = &texts(path, "**Event**: run.failed")[0];
        assert_eq!(text.matches("```").count(), 2, "{path}: {text}");
    }
}

/// A chat robot's URL that names no hook (the robot removed: a 404) is a configuration fault:
/// the delivery is given up at its first attempt, and the delivery log says so.
async fn a_robot_hook_that_is_not_there_is_given_up_at_once_and_named(db: &TestDb) {
    let (base, got, server) = receiver(always(404, "404 page not found")).await;
    let mut channels = Channels::new()
        .with(Channel::new(
            "wecom",
            ChannelKind::WeCom {
                url: url(&base, "/cgi-bin/webhook/send?key=removed"),
            },
        ))
        .unwrap();
    // Retries in test time, were it retried.
    channels.retry_base = Duration::from_millis(200);
    let n = start(
        node(db, "a", tasks("refusal.a"))
            .config_document(doc(vec![entry("refusal.a", "0 0 1 1 *")]))
            .channels(channels)
            .build()
            .unwrap(),
    );
    trigger_all_now(db, 1).await;
    wait_until(Duration::from_secs(60), "the delivery given up", || async {
        let outbox = db.outbox().await;
        !outbox.is_empty() && outbox.iter().all(|(_, state)| state == "failed")
    })
    .await;
    let outbox = db.outbox().await;
    let deliveries = db.api().deliveries(50).await.unwrap();
    n.stop().await;
    server.abort();
    assert_eq!(outbox, [(1, "failed".to_owned())], "one attempt");
    assert_eq!(got.all().len(), 1);
    let error = deliveries[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("answered 404") && error.contains("no such hook"),
        "{error}"
    );
    assert!(error.contains("not retried"), "{error}");
}
