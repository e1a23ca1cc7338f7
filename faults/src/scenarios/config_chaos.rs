//! `config-chaos`: two nodes read a config file, one an HTTP source served by the harness on
//! 127.0.0.1. For `--minutes`, the harness writes thousands of documents (one every 15-50 ms) that must be refused
//! (truncated, oversized, wrong-typed, unknown fields, random JSON, binary garbage), by plain
//! overwrite and by write-then-rename, and answers the HTTP node with the same (plus 500s,
//! cut-off bodies, slow answers and bodies over the size limit). Rarely it publishes a valid
//! document and holds it long enough for every node to read it: that is the judge's "last good
//! state". No node may exit, and the last good document's tasks must keep running.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::chaos::{Answer, ConfigServer, bad_document, valid_document};
use crate::harness::{Options, Outcome, Result, Scenario, write_atomically};
use crate::timeline::now_ms;

/// Tasks the valid documents choose from.
const POOL: usize = 20;
/// How long a valid document stays up: every node polls (every 1 s) at least three times.
const HOLD: Duration = Duration::from_millis(3_500);
/// Largest oversized document on disk.
const MAX_MB: u64 = 6;

pub(super) async fn run(opts: &Options) -> Result<Outcome> {
    let mut sc = Scenario::new("config-chaos", opts).await?;
    let (mut good, schedule) = valid_document(&mut sc.rng, POOL);
    write_atomically(&sc.config_path, good.as_bytes())?;
    let t = now_ms();
    sc.note_schedule(t, &schedule);
    let server = ConfigServer::start(Answer::Body(Arc::new(good.clone().into_bytes()))).await?;
    sc.add_file_node("a", None);
    sc.add_file_node("b", None);
    sc.fleet.add(crate::harness::NodeSpec {
        id: "c-http".into(),
        config: server.url(),
        skew: None,
        env: Vec::new(),
    });
    sc.start_all()?;
    sc.idle(Duration::from_secs(6)).await;

    let end = Instant::now() + Duration::from_secs_f64(opts.minutes * 60.0);
    let mut next_valid = Instant::now() + Duration::from_secs(sc.rng.range(15, 31));
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    let (mut written, mut bytes, mut renamed, mut valid) = (0usize, 0usize, 0usize, 0usize);
    let mut http_tricks: BTreeMap<&'static str, usize> = BTreeMap::new();
    while Instant::now() < end {
        if Instant::now() >= next_valid {
            let (text, schedule) = valid_document(&mut sc.rng, POOL);
            if sc.rng.chance(0.5) {
                write_atomically(&sc.config_path, text.as_bytes())?;
                renamed += 1;
            } else {
                std::fs::write(&sc.config_path, text.as_bytes())?;
            }
            server.set(Answer::Body(Arc::new(text.clone().into_bytes())));
            let t = now_ms();
            sc.note_schedule(t, &schedule);
            sc.idle(HOLD).await;
            sc.fault("valid config document published", t, now_ms());
            good = text;
            valid += 1;
            written += 1;
            next_valid = Instant::now() + Duration::from_secs(sc.rng.range(15, 31));
            continue;
        }
        let (kind, doc) = bad_document(&mut sc.rng, &good, MAX_MB);
        *kinds.entry(kind.name()).or_default() += 1;
        if sc.rng.chance(0.5) {
            write_atomically(&sc.config_path, &doc)?;
            renamed += 1;
        } else {
            std::fs::write(&sc.config_path, &doc)?;
        }
        written += 1;
        bytes += doc.len();
        let doc = Arc::new(doc);
        let roll = sc.rng.range(0, 100);
        let answer = match roll {
            0..=4 => {
                *http_tricks.entry("500").or_default() += 1;
                Answer::ServerError
            }
            5..=7 => {
                *http_tricks.entry("cut-off body").or_default() += 1;
                Answer::CutOff(doc)
            }
            8..=10 => {
                *http_tricks.entry("slow answer").or_default() += 1;
                let delay = Duration::from_millis(sc.rng.range(200, 900));
                Answer::Slow(doc, delay)
            }
            11..=12 => {
                // Over the HTTP source's 8 MB limit: the last good document padded with 9 MB
                // of whitespace (valid JSON, so accepting it would change nothing either).
                *http_tricks.entry("9 MB body").or_default() += 1;
                let mut big = vec![b' '; 9 * 1024 * 1024];
                big.extend_from_slice(good.as_bytes());
                Answer::Body(Arc::new(big))
            }
            _ => Answer::Body(doc),
        };
        server.set(answer);
        let pause = Duration::from_millis(sc.rng.range(15, 51));
        sc.idle(pause).await;
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let tricks: Vec<String> = http_tricks
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    sc.notes.push(format!(
        "{written} documents written ({renamed} by rename, the rest overwritten in place; {:.0} MB of refused text): {valid} valid, refused ones: {}",
        bytes as f64 / 1e6,
        kinds.join(", ")
    ));
    sc.notes.push(format!(
        "HTTP source: {} requests answered; besides the refused documents, its answer was set to: {}",
        server.served(),
        tricks.join(", ")
    ));
    let outcome = sc.finish().await;
    drop(server);
    outcome
}
