//! `config-race`: two nodes, `f.tick.00` every 10 s. 1.5 s before a tick boundary the harness
//! locks the config state row (`SELECT ... FOR UPDATE`) for 3 s while it rewrites the config to
//! every 5 s (and back, alternately): the nodes' reconciles wait on the lock while the tick runs.

use std::time::Duration;

use sqlx::Connection;

use crate::harness::{Options, Outcome, Result, Scenario};
use crate::timeline::now_ms;

const ROUNDS: usize = 4;
const CRONS: [&str; 2] = ["*/5 * * * * *", "*/10 * * * * *"];

pub(super) async fn run(opts: &Options) -> Result<Outcome> {
    let mut sc = Scenario::new("config-race", opts).await?;
    sc.write_config(&[("f.tick.00", "*/10 * * * * *")])?;
    for id in ["a", "b"] {
        sc.add_file_node(id, None);
    }
    sc.start_all()?;
    sc.idle(Duration::from_secs(6)).await;
    let mut log = Vec::new();
    for round in 0..ROUNDS {
        let cron = CRONS[round % 2];
        let mut boundary = (now_ms() / 10_000 + 1) * 10_000;
        if boundary - now_ms() < 4_000 {
            boundary += 10_000;
        }
        sc.idle(Duration::from_millis(
            (boundary - 1_500 - now_ms()).max(0) as u64
        ))
        .await;
        let mut conn = sc.connect().await?;
        let mut tx = conn.begin().await?;
        let locked = sqlx::query("SELECT * FROM scheduler_config_state WHERE id = 1 FOR UPDATE")
            .fetch_all(&mut *tx)
            .await?
            .len();
        let t_w = sc.write_config(&[("f.tick.00", cron)])?;
        sc.idle(Duration::from_secs(3)).await;
        tx.commit().await?;
        let t_r = now_ms();
        conn.close().await?;
        sc.fault(
            format!("config state row locked for 3 s while the cron became `{cron}`"),
            t_w,
            t_r,
        );
        log.push(format!(
            "`{cron}` written {:.1} s before {} ({} row locked)",
            (boundary - t_w) as f64 / 1000.0,
            chrono::DateTime::from_timestamp_millis(boundary)
                .unwrap_or_default()
                .format("%H:%M:%S"),
            locked
        ));
        sc.idle(Duration::from_millis(
            (boundary + 8_000 - now_ms()).max(0) as u64
        ))
        .await;
    }
    sc.notes.push(format!(
        "config rewritten under a held row lock: {}",
        log.join("; ")
    ));
    sc.finish().await
}
