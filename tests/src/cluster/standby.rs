//! A streaming standby of a [`TempCluster`]: `pg_basebackup -R` of the primary into a dir of
//! its own, started on its own free port. It follows the primary until promoted; a synchronous
//! one is waited for by the primary at every commit.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use super::{
    ClusterError, PORT_ATTEMPTS, Result, TempCluster, free_port, io_err, sweep_abandoned_dirs,
};

/// How long [`TempCluster::start_synchronous_standby`] waits for the primary to report the
/// standby `sync`.
const SYNC_WAIT: Duration = Duration::from_secs(30);

impl TempCluster {
    /// Starts a hot standby of this cluster (streaming replication from `pg_basebackup -R`,
    /// which trust auth on 127.0.0.1 allows), and waits until it accepts connections. Dropping
    /// it stops it and removes its dir; the primary is untouched.
    pub async fn start_standby(&self) -> Result<TempCluster> {
        self.standby_named(None).await
    }

    /// Starts a synchronous standby of this cluster: a hot standby as
    /// [`start_standby`](Self::start_standby) starts one, connecting under an `application_name`
    /// of its own (in its `primary_conninfo`), which this cluster then names in
    /// `synchronous_standby_names`, with `synchronous_commit = on`: every commit here returns
    /// only once the standby has it, so promoting the standby loses no committed transaction.
    /// Waits until this cluster reports the standby `sync`.
    ///
    /// The promoted standby does not wait for anyone (the setting is this cluster's alone).
    pub async fn start_synchronous_standby(&self) -> Result<TempCluster> {
        let name = format!(
            "standby_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let standby = self.standby_named(Some(&name)).await?;
        self.append_conf(&format!(
            "\n# scheduler TempCluster: a synchronous standby\n\
             synchronous_standby_names = '\"{name}\"'\n\
             synchronous_commit = on\n"
        ))?;
        let data = self.data.to_string_lossy().into_owned();
        self.run("pg_ctl", &["-D", &data, "reload"], "pg_ctl reload failed")
            .await?;
        self.wait_for_sync(&name).await?;
        Ok(standby)
    }

    /// Polls `pg_stat_replication` until the standby `name` is `sync`.
    async fn wait_for_sync(&self, name: &str) -> Result<()> {
        let deadline = tokio::time::Instant::now() + SYNC_WAIT;
        loop {
            let state = async {
                use sqlx::Connection;
                let mut connection = sqlx::PgConnection::connect(&self.url()).await?;
                let state: Option<String> = sqlx::query_scalar(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1",
                )
                .bind(name)
                .fetch_optional(&mut connection)
                .await?;
                let _ = connection.close().await;
                Ok::<_, sqlx::Error>(state)
            };
            let last = match state.await {
                Ok(Some(state)) if state == "sync" => return Ok(()),
                Ok(state) => format!("sync_state {state:?}"),
                Err(e) => e.to_string(),
            };
            if tokio::time::Instant::now() > deadline {
                return Err(ClusterError::Command {
                    context: format!("the standby {name} did not become synchronous"),
                    detail: format!("after {SYNC_WAIT:?}: {last}"),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A hot standby; with `application_name`, connecting to this cluster under that name.
    async fn standby_named(&self, application_name: Option<&str>) -> Result<TempCluster> {
        let base = self
            .root
            .parent()
            .map_or_else(std::env::temp_dir, PathBuf::from);
        sweep_abandoned_dirs(&base);
        let root = base.join(format!(
            "scheduler-pg.{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ));
        std::fs::create_dir(&root).map_err(io_err(format!("cannot create {}", root.display())))?;
        let mut standby = TempCluster {
            data: root.join("data"),
            root,
            bindir: self.bindir.clone(),
            port: 0,
            run_as: self.run_as,
        };
        // From here on, Drop cleans up whatever we made.
        std::fs::set_permissions(&standby.root, std::fs::Permissions::from_mode(0o700))
            .map_err(io_err("cannot chmod the standby's dir"))?;
        if let Some((uid, gid)) = standby.run_as {
            std::os::unix::fs::chown(&standby.root, Some(uid), Some(gid))
                .map_err(io_err("cannot chown the standby's dir to the server user"))?;
        }
        let data = standby.data.to_string_lossy().into_owned();
        let port = self.port.to_string();
        standby
            .run(
                "pg_basebackup",
                &[
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-U",
                    "postgres",
                    "-D",
                    &data,
                    "-R",
                    "-X",
                    "stream",
                    "-c",
                    "fast",
                    "--no-sync",
                ],
                "pg_basebackup from the primary failed",
            )
            .await?;
        // The copied postgresql.conf names the primary's socket dir and port: later lines win.
        standby.append_conf(&format!(
            "\n# scheduler TempCluster standby\nunix_socket_directories = '{}'\n",
            super::conf_quote(&standby.root.to_string_lossy())
        ))?;
        if let Some(name) = application_name {
            // `-R` wrote a primary_conninfo into postgresql.auto.conf, which is read after
            // postgresql.conf: the later line there wins.
            let conninfo =
                format!("host=127.0.0.1 port={port} user=postgres application_name={name}");
            standby.append_to(
                "postgresql.auto.conf",
                &format!("primary_conninfo = '{}'\n", super::conf_quote(&conninfo)),
            )?;
        }
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            standby.port = free_port()?;
            standby.append_conf(&format!("port = {}\n", standby.port))?;
            match standby.pg_ctl_start().await {
                Ok(()) => return Ok(standby),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.expect("at least one attempt"))
    }

    /// Promotes this standby to a primary (`pg_ctl promote`), waiting until it takes writes.
    pub async fn promote(&self) -> Result<()> {
        let data = self.data.to_string_lossy().into_owned();
        self.run(
            "pg_ctl",
            &["-D", &data, "-w", "-t", super::PG_CTL_WAIT_SECS, "promote"],
            "pg_ctl promote failed",
        )
        .await
        .map(drop)
    }
}
