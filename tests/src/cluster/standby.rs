//! A streaming standby of a [`TempCluster`]: `pg_basebackup -R` of the primary into a dir of
//! its own, started on its own free port. It follows the primary until promoted.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::{PORT_ATTEMPTS, Result, TempCluster, free_port, io_err, sweep_abandoned_dirs};

impl TempCluster {
    /// Starts a hot standby of this cluster (streaming replication from `pg_basebackup -R`,
    /// which trust auth on 127.0.0.1 allows), and waits until it accepts connections. Dropping
    /// it stops it and removes its dir; the primary is untouched.
    pub async fn start_standby(&self) -> Result<TempCluster> {
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
