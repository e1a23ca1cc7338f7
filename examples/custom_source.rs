//! Plugging a company config centre into the scheduler with [`ConfigSource`].
//!
//! The in-house service here is made up but typical (Apollo, Nacos and most home-grown centres
//! look alike): `GET {base}/v1/configs/{app}/{key}?knownRevision=N`, authenticated by an
//! `X-Access-Token` header, answers with an envelope
//!
//! ```json
//! {"code": 0, "message": "ok", "data": {"revision": 18, "format": "yaml", "content": "tasks: ..."}}
//! ```
//!
//! or `{"code": 304, "message": "not modified"}` while `knownRevision` is still current. The
//! source unwraps the envelope; parsing, keeping the last good document and validation are the
//! scheduler's.
//!
//! Run with `DATABASE_URL=... CONFIG_CENTRE_URL=http://config-centre:8080 CONFIG_CENTRE_TOKEN=...
//! cargo run -p scheduler-examples --example custom_source`.

use std::time::Duration;

use async_trait::async_trait;
use scheduler::SchedulerBuilder;
use scheduler::config::{ConfigError, ConfigFormat, ConfigSource, Fetched, RawConfig};
use serde::Deserialize;

#[scheduler::task(name = "syncAdvertiserReport")]
async fn sync_advertiser_report(ctx: scheduler::TaskContext) -> anyhow::Result<()> {
    tracing::info!(tick = %ctx.scheduled_at(), "syncing");
    Ok(())
}

/// The config centre's answer.
#[derive(Deserialize)]
struct Envelope {
    code: i32,
    #[serde(default)]
    message: String,
    data: Option<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    revision: u64,
    format: String,
    content: String,
}

/// One key of the in-house config centre.
struct ConfigCentreSource {
    client: reqwest::Client,
    base: String,
    app: String,
    key: String,
    token: String,
    known_revision: Option<u64>,
}

impl ConfigCentreSource {
    fn new(base: &str, app: &str, key: &str, token: String) -> Result<Self, ConfigError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| ConfigError::fetch("config centre", e))?;
        Ok(Self {
            client,
            base: base.trim_end_matches('/').to_owned(),
            app: app.to_owned(),
            key: key.to_owned(),
            token,
            known_revision: None,
        })
    }
}

#[async_trait]
impl ConfigSource for ConfigCentreSource {
    fn describe(&self) -> String {
        // Never the token.
        format!("config centre {}/{} at {}", self.app, self.key, self.base)
    }

    async fn fetch(&mut self) -> Result<Fetched, ConfigError> {
        let mut url = format!("{}/v1/configs/{}/{}", self.base, self.app, self.key);
        if let Some(revision) = self.known_revision {
            url.push_str(&format!("?knownRevision={revision}"));
        }
        let fail = |message: String| ConfigError::fetch(self.describe(), message);
        let response = self
            .client
            .get(&url)
            .header("X-Access-Token", &self.token)
            .send()
            .await
            .map_err(|e| fail(e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(fail(format!("answered {}", response.status())));
        }
        let body = response
            .text()
            .await
            .map_err(|e| fail(e.without_url().to_string()))?;
        let envelope: Envelope =
            serde_json::from_str(&body).map_err(|e| fail(format!("bad envelope: {e}")))?;
        match envelope.code {
            304 => Ok(Fetched::Unchanged),
            0 => {
                let entry = envelope
                    .data
                    .ok_or_else(|| fail("code 0 without data".to_owned()))?;
                let format: ConfigFormat = entry.format.parse()?;
                self.known_revision = Some(entry.revision);
                Ok(Fetched::Changed(
                    RawConfig::new(entry.content)
                        .with_format(format)
                        .with_revision(entry.revision.to_string()),
                ))
            }
            code => Err(fail(format!("code {code}: {}", envelope.message))),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    scheduler::init_tracing();
    let base =
        std::env::var("CONFIG_CENTRE_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".to_owned());
    let token = std::env::var("CONFIG_CENTRE_TOKEN").unwrap_or_default();
    let source = ConfigCentreSource::new(&base, "myapp", "scheduler-tasks", token)?;

    // From here on it is the same as for a file or an HTTP URL: polled, last good document kept,
    // reconciled into the database on every change.
    SchedulerBuilder::from_env()?
        .config_source(source)
        .config_poll_interval(Duration::from_secs(5))
        .build()?
        .run_until(scheduler::shutdown_signal())
        .await?;
    Ok(())
}
