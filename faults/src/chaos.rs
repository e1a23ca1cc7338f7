//! Config chaos: documents that must be refused (truncated, oversized, wrong-typed, unknown
//! fields, random JSON, binary garbage), the rare valid ones, and a tiny HTTP server on
//! 127.0.0.1 whose answer the harness swaps (and sometimes breaks: 500s, cut-off bodies, slow
//! answers, bodies over the source's size limit).
//!
//! Whether a generated document is valid is decided here, by a strict mirror of the documented
//! format (`{"version"?: int, "tasks": [{"name", "enabled", "cron", "timezone"?}]}`, no unknown
//! fields), not by the engine's parser.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::prng::Rng;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // read by serde only
struct MirrorDoc {
    #[serde(default)]
    version: Option<i64>,
    tasks: Vec<MirrorEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // read by serde only
struct MirrorEntry {
    name: String,
    enabled: bool,
    cron: String,
    #[serde(default)]
    timezone: Option<String>,
}

/// Whether `bytes` is a well-formed config document (JSON, the documented shape).
pub fn is_valid_document(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str::<MirrorDoc>(text).is_ok()
}

/// Crons the valid documents pick from.
pub const CRONS: &[&str] = &[
    "* * * * * *",
    "*/2 * * * * *",
    "*/3 * * * * *",
    "*/5 * * * * *",
];

/// A valid document: a random choice of `f.tick.00..{pool}` entries, some disabled. Returns the
/// text and the schedule it sets (task, cron if enabled).
pub fn valid_document(rng: &mut Rng, pool: usize) -> (String, Vec<(String, Option<String>)>) {
    let mut tasks = Vec::new();
    let mut schedule = Vec::new();
    for i in 0..pool {
        if !rng.chance(0.6) {
            continue;
        }
        let name = format!("f.tick.{i:02}");
        let enabled = rng.chance(0.8);
        let cron = *rng.pick(CRONS).expect("crons");
        tasks.push(
            serde_json::json!({"name": name, "enabled": enabled, "cron": cron, "timezone": "UTC"}),
        );
        schedule.push((name, enabled.then(|| cron.to_owned())));
    }
    if schedule.iter().all(|(_, c)| c.is_none()) {
        tasks.push(serde_json::json!({"name": "f.tick.00", "enabled": true, "cron": "* * * * * *", "timezone": "UTC"}));
        schedule.retain(|(n, _)| n != "f.tick.00");
        schedule.push(("f.tick.00".into(), Some("* * * * * *".into())));
    }
    let text = if rng.chance(0.5) {
        serde_json::to_string_pretty(&serde_json::json!({ "tasks": tasks }))
    } else {
        serde_json::to_string(&serde_json::json!({ "tasks": tasks }))
    }
    .expect("json");
    (text + "\n", schedule)
}

/// The kinds of documents that must be refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BadKind {
    /// A valid document cut short.
    Truncated,
    /// Megabytes of entries that end in a mistake.
    Oversized,
    /// A field of the wrong type (`"enabled":"yes"`, `"cron":5`, ...).
    WrongType,
    /// A field the format does not have.
    UnknownField,
    /// Random JSON of the wrong shape.
    RandomJson,
    /// Random bytes.
    Garbage,
    /// Empty, `{}`, `null`, `[]`.
    Empty,
}

impl BadKind {
    /// Lower-case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            BadKind::Truncated => "truncated",
            BadKind::Oversized => "oversized",
            BadKind::WrongType => "wrong-typed",
            BadKind::UnknownField => "unknown-field",
            BadKind::RandomJson => "random-json",
            BadKind::Garbage => "binary-garbage",
            BadKind::Empty => "empty",
        }
    }
}

fn entry_text(i: usize) -> String {
    format!(
        r#"{{"name":"f.tick.{:02}","enabled":true,"cron":"* * * * * *","timezone":"UTC"}}"#,
        i % 50
    )
}

fn random_json(rng: &mut Rng, depth: u32) -> serde_json::Value {
    use serde_json::Value;
    let pick = if depth >= 3 {
        rng.range(0, 4)
    } else {
        rng.range(0, 6)
    };
    match pick {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(0.5)),
        2 => Value::from(rng.next_u64() as i64 >> rng.range(0, 60)),
        3 => Value::from(random_word(rng)),
        4 => Value::Array(
            (0..rng.range(0, 5))
                .map(|_| random_json(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let keys = [
                "tasks", "name", "enabled", "cron", "timezone", "version", "x", "Tasks",
            ];
            Value::Object(
                (0..rng.range(0, 5))
                    .map(|_| {
                        let key = if rng.chance(0.7) {
                            (*rng.pick(&keys).expect("keys")).to_owned()
                        } else {
                            random_word(rng)
                        };
                        (key, random_json(rng, depth + 1))
                    })
                    .collect(),
            )
        }
    }
}

fn random_word(rng: &mut Rng) -> String {
    let n = rng.range(0, 12) as usize;
    (0..n)
        .map(|_| (b'a' + rng.range(0, 26) as u8) as char)
        .collect()
}

/// A document that must be refused, of a random kind, derived from `good` (a valid document);
/// oversized ones are up to `max_mb` MB.
pub fn bad_document(rng: &mut Rng, good: &str, max_mb: u64) -> (BadKind, Vec<u8>) {
    loop {
        let roll = rng.range(0, 100);
        let (kind, bytes) = match roll {
            0..=19 => {
                let trimmed = good.trim_end();
                let cut = rng.range(0, trimmed.len().saturating_sub(1) as u64) as usize;
                let cut = (0..=cut)
                    .rev()
                    .find(|c| trimmed.is_char_boundary(*c))
                    .unwrap_or(0);
                (BadKind::Truncated, trimmed.as_bytes()[..cut].to_vec())
            }
            20..=22 => (BadKind::Oversized, oversized(rng, max_mb)),
            23..=44 => (BadKind::WrongType, wrong_typed(rng)),
            45..=62 => (BadKind::UnknownField, unknown_field(rng)),
            63..=77 => {
                let v = random_json(rng, 0);
                (BadKind::RandomJson, serde_json::to_vec(&v).expect("json"))
            }
            78..=92 => {
                let n = rng.range(1, 4096) as usize;
                let bytes = if rng.chance(0.3) {
                    (0..n).map(|_| rng.range(0x20, 0x7f) as u8).collect()
                } else {
                    (0..n).map(|_| rng.next_u64() as u8).collect()
                };
                (BadKind::Garbage, bytes)
            }
            _ => {
                let texts: [&[u8]; 7] = [
                    b"",
                    b"   \n",
                    b"{}",
                    b"null",
                    b"[]",
                    br#"{"tasks":null}"#,
                    b"\xef\xbb\xbf",
                ];
                (BadKind::Empty, rng.pick(&texts).expect("texts").to_vec())
            }
        };
        // By construction these are all invalid; the mirror makes sure.
        if !is_valid_document(&bytes) {
            return (kind, bytes);
        }
    }
}

fn wrong_typed(rng: &mut Rng) -> Vec<u8> {
    let mistakes = [
        r#"{"name":"f.tick.00","enabled":"yes","cron":"* * * * * *","timezone":"UTC"}"#,
        r#"{"name":"f.tick.00","enabled":true,"cron":5,"timezone":"UTC"}"#,
        r#"{"name":7,"enabled":true,"cron":"* * * * * *"}"#,
        r#"{"name":"f.tick.00","enabled":null,"cron":"* * * * * *"}"#,
        r#"{"name":"f.tick.00","enabled":true,"cron":["*"]}"#,
        r#"{"name":"f.tick.00","enabled":1,"cron":"* * * * * *"}"#,
        r#"{"name":"f.tick.00","enabled":true,"cron":"* * * * * *","timezone":3}"#,
        r#""f.tick.00""#,
    ];
    let n = rng.range(0, 8) as usize;
    let mut entries: Vec<String> = (0..n).map(entry_text).collect();
    let at = rng.range(0, n as u64 + 1) as usize;
    entries.insert(at, (*rng.pick(&mistakes).expect("mistakes")).to_owned());
    let whole = [
        format!(r#"{{"tasks":[{}]}}"#, entries.join(",")),
        format!(
            r#"{{"version":"7","tasks":[{}]}}"#,
            (0..n).map(entry_text).collect::<Vec<_>>().join(",")
        ),
        r#"{"tasks":{}}"#.to_owned(),
        r#"{"tasks":"f.tick.00"}"#.to_owned(),
        r#"{"version":1.5,"tasks":[]}"#.to_owned(),
    ];
    let i = if rng.chance(0.7) {
        0
    } else {
        rng.range(1, whole.len() as u64) as usize
    };
    whole[i].clone().into_bytes()
}

fn unknown_field(rng: &mut Rng) -> Vec<u8> {
    let n = rng.range(1, 8) as usize;
    let entries: Vec<String> = (0..n).map(entry_text).collect();
    let options = [
        format!(
            r#"{{"tasks":[{},{{"name":"f.tick.01","enable":true,"cron":"* * * * * *"}}]}}"#,
            entries.join(",")
        ),
        format!(r#"{{"tasks":[{}],"retries":3}}"#, entries.join(",")),
        format!(r#"{{"task":[{}]}}"#, entries.join(",")),
        format!(
            r#"{{"tasks":[{{"name":"f.tick.02","enabled":true,"cron":"* * * * * *","timeout":"5s"}},{}]}}"#,
            entries.join(",")
        ),
    ];
    rng.pick(&options).expect("options").clone().into_bytes()
}

fn oversized(rng: &mut Rng, max_mb: u64) -> Vec<u8> {
    let target = rng.range((max_mb / 2).max(1), max_mb.max(1) + 1) as usize * 1024 * 1024;
    let mut out = String::with_capacity(target + 1024);
    if rng.chance(0.3) {
        // Valid entries and an unknown, huge field.
        out.push_str(r#"{"tasks":["#);
        out.push_str(&entry_text(0));
        out.push_str(r#"],"padding":""#);
        while out.len() < target {
            out.push_str("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        }
        out.push_str("\"}");
        return out.into_bytes();
    }
    out.push_str("{\"tasks\":[\n");
    let mut i = 0;
    while out.len() < target {
        out.push_str(&entry_text(i));
        out.push_str(",\n");
        i += 1;
    }
    match rng.range(0, 3) {
        0 => out.push_str(r#"{"name":"f.tick.01","enabled":"yes","cron":"* * * * * *"}]}"#),
        1 => out.push_str(r#"{"name":"f.tick.01","enabled":true,"cron":"#),
        _ => out.push_str(&format!("{}]}}trailing", entry_text(1))),
    }
    out.into_bytes()
}

/// How the HTTP server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 200 with the body.
    Body(Arc<Vec<u8>>),
    /// 500.
    ServerError,
    /// 200 announcing more bytes than it sends, then the connection closes.
    CutOff(Arc<Vec<u8>>),
    /// 200 with the body after a delay.
    Slow(Arc<Vec<u8>>, Duration),
}

/// A tiny HTTP/1.1 server for the HTTP config source; stops when dropped.
#[derive(Debug)]
pub struct ConfigServer {
    answer: Arc<Mutex<Answer>>,
    port: u16,
    task: tokio::task::JoinHandle<()>,
    served: Arc<std::sync::atomic::AtomicU64>,
}

impl ConfigServer {
    /// Listens on 127.0.0.1 (a free port), answering `initial`.
    pub async fn start(initial: Answer) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let answer = Arc::new(Mutex::new(initial));
        let served = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let task = tokio::spawn(serve(listener, Arc::clone(&answer), Arc::clone(&served)));
        Ok(Self {
            answer,
            port,
            task,
            served,
        })
    }

    /// The URL nodes poll.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/tasks.json", self.port)
    }

    /// Swaps the answer.
    pub fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap_or_else(|p| p.into_inner()) = answer;
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.served.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for ConfigServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    listener: TcpListener,
    answer: Arc<Mutex<Answer>>,
    served: Arc<std::sync::atomic::AtomicU64>,
) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let answer = answer.lock().unwrap_or_else(|p| p.into_inner()).clone();
        served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(15), respond(sock, answer)).await;
        });
    }
}

async fn respond(mut sock: TcpStream, answer: Answer) -> std::io::Result<()> {
    // Read the request head (it is never large); the answer does not depend on it.
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        let n = sock.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let (status, body, announced) = match &answer {
        Answer::Body(b) => ("200 OK", b.clone(), b.len()),
        Answer::ServerError => ("500 Internal Server Error", Arc::new(b"oops".to_vec()), 4),
        Answer::CutOff(b) => ("200 OK", Arc::new(b[..b.len() / 2].to_vec()), b.len()),
        Answer::Slow(b, delay) => {
            tokio::time::sleep(*delay).await;
            ("200 OK", b.clone(), b.len())
        }
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {announced}\r\nConnection: close\r\n\r\n"
    );
    sock.write_all(header.as_bytes()).await?;
    sock.write_all(&body).await?;
    sock.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_documents_are_invalid_and_valid_ones_valid() {
        let mut rng = Rng::new(11);
        let (good, schedule) = valid_document(&mut rng, 20);
        assert!(is_valid_document(good.as_bytes()), "{good}");
        assert!(schedule.iter().any(|(_, c)| c.is_some()));
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..300 {
            let (kind, bytes) = bad_document(&mut rng, &good, 1);
            assert!(!is_valid_document(&bytes), "{kind:?}");
            kinds.insert(kind);
        }
        assert!(kinds.len() >= 6, "{kinds:?}");
        assert!(!is_valid_document(
            br#"{"tasks":[{"name":"a","enabled":"yes","cron":"* * * * *"}]}"#
        ));
        assert!(is_valid_document(br#"{"version":3,"tasks":[]}"#));
    }
}
