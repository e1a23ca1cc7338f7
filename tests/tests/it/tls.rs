//! TLS to PostgreSQL as libpq users expect it: `sslmode`, `sslrootcert`, client certificates,
//! from the URL or the `PGSSL*` environment, against a real server started here with `ssl = on`
//! and a certificate authority made here (rcgen). Each test has a private cluster: its
//! `postgresql.conf` and `pg_hba.conf` are the test's own.

mod on_postgres {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    use scheduler::store::{PgStore, Store};
    use scheduler_tests::TempCluster;

    /// A certificate and its private key, PEM.
    struct Pem {
        cert: String,
        key: String,
    }

    /// A private certificate authority.
    struct Ca {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    impl Ca {
        fn new(name: &str) -> Ca {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::CommonName, name);
            let key = KeyPair::generate().unwrap();
            let cert = params.self_signed(&key).unwrap();
            Ca {
                pem: cert.pem(),
                issuer: Issuer::new(params, key),
            }
        }

        /// A certificate for `names` (DNS names or IP addresses), common name `cn`.
        fn sign(&self, cn: &str, names: &[&str]) -> Pem {
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            let mut params = CertificateParams::new(names).unwrap();
            params.distinguished_name.push(DnType::CommonName, cn);
            let key = KeyPair::generate().unwrap();
            let cert = params.signed_by(&key, &self.issuer).unwrap();
            Pem {
                cert: cert.pem(),
                key: key.serialize_pem(),
            }
        }
    }

    /// A cluster serving TLS with a certificate for `localhost` signed by its own CA, which also
    /// signs client certificates the server accepts.
    struct TlsServer {
        cluster: TempCluster,
        ca: Ca,
        /// Client-side files (CA bundles, client certificates).
        dir: tempfile::TempDir,
    }

    impl TlsServer {
        async fn start(hba: Option<&str>) -> TlsServer {
            let cluster = TempCluster::start().await.expect("start a cluster");
            let ca = Ca::new("scheduler test CA");
            let server = ca.sign("localhost", &["localhost"]);
            let cert = cluster
                .write_file("server.crt", server.cert.as_bytes())
                .unwrap();
            let key = cluster
                .write_file("server.key", server.key.as_bytes())
                .unwrap();
            let client_ca = cluster.write_file("ca.crt", ca.pem.as_bytes()).unwrap();
            cluster
                .reconfigure(
                    &[
                        ("ssl", "on"),
                        ("ssl_cert_file", &cert.to_string_lossy()),
                        ("ssl_key_file", &key.to_string_lossy()),
                        ("ssl_ca_file", &client_ca.to_string_lossy()),
                    ],
                    hba,
                )
                .await
                .unwrap_or_else(|e| panic!("restart with ssl=on: {e}"));
            TlsServer {
                cluster,
                ca,
                dir: tempfile::tempdir().unwrap(),
            }
        }

        /// Writes a client-side file and returns its path.
        fn file(&self, name: &str, contents: &str) -> PathBuf {
            write_private(self.dir.path(), name, contents)
        }

        fn ca_file(&self) -> PathBuf {
            self.file("root.crt", &self.ca.pem)
        }

        /// `postgres://postgres@HOST:PORT/postgres?QUERY`.
        fn url(&self, host: &str, query: &str) -> String {
            format!(
                "postgres://postgres@{host}:{}/postgres?{query}",
                self.cluster.port()
            )
        }
    }

    fn write_private(dir: &Path, name: &str, contents: &str) -> PathBuf {
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, contents.as_bytes()).unwrap();
        path
    }

    fn q(path: &Path) -> String {
        percent_encode(&path.to_string_lossy())
    }

    fn percent_encode(s: &str) -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    }

    /// Connects through the scheduler's store (migrations are a real use) and answers whether
    /// the session is encrypted, or the error as the user sees it.
    async fn connect(url: &str) -> Result<bool, String> {
        let store = PgStore::builder(url)
            .connect_lazy()
            .map_err(|e| e.to_string())?;
        store.migrate().await.map_err(|e| e.to_string())?;
        let ssl: bool =
            sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                .fetch_one(store.pool())
                .await
                .map_err(|e| e.to_string())?;
        store.pool().close().await;
        Ok(ssl)
    }

    #[tokio::test]
    async fn verify_full_with_the_right_ca_and_host_connects_encrypted() {
        let server = TlsServer::start(None).await;
        let url = server.url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={}", q(&server.ca_file())),
        );
        assert_eq!(connect(&url).await, Ok(true));
    }

    #[tokio::test]
    async fn verify_full_with_a_wrong_ca_is_refused_naming_the_certificate() {
        let server = TlsServer::start(None).await;
        let other = Ca::new("someone else's CA");
        let wrong = server.file("other.crt", &other.pem);
        let url = server.url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={}", q(&wrong)),
        );
        let error = connect(&url).await.unwrap_err();
        assert!(error.contains("certificate"), "{error}");
        assert!(
            error.contains("not signed by") || error.contains("UnknownIssuer"),
            "{error}"
        );
        // verify-ca checks the same chain.
        let url = server.url(
            "localhost",
            &format!("sslmode=verify-ca&sslrootcert={}", q(&wrong)),
        );
        assert!(connect(&url).await.is_err());
    }

    #[tokio::test]
    async fn verify_full_with_a_wrong_host_name_is_refused_and_verify_ca_is_not() {
        let server = TlsServer::start(None).await;
        let ca = q(&server.ca_file());
        // The certificate names `localhost`, not `127.0.0.1`.
        let url = server.url(
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        );
        let error = connect(&url).await.unwrap_err();
        assert!(error.contains("certificate"), "{error}");
        assert!(
            error.contains("not valid for") || error.contains("NotValidForName"),
            "{error}"
        );
        assert!(error.contains("127.0.0.1"), "{error}");
        // verify-ca checks the chain only, as in libpq.
        let url = server.url("127.0.0.1", &format!("sslmode=verify-ca&sslrootcert={ca}"));
        assert_eq!(connect(&url).await, Ok(true));
    }

    #[tokio::test]
    async fn require_and_the_default_prefer_encrypt_without_a_ca() {
        let server = TlsServer::start(None).await;
        assert_eq!(
            connect(&server.url("127.0.0.1", "sslmode=require")).await,
            Ok(true)
        );
        // No sslmode: libpq's default `prefer` uses TLS when the server offers it.
        assert_eq!(
            connect(&server.url("127.0.0.1", "application_name=x")).await,
            Ok(true)
        );
        assert_eq!(
            connect(&server.url("127.0.0.1", "sslmode=disable")).await,
            Ok(false)
        );
    }

    #[tokio::test]
    async fn require_with_a_ca_file_verifies_the_chain_as_libpq_does() {
        let server = TlsServer::start(None).await;
        let other = Ca::new("someone else's CA");
        let wrong = server.file("other.crt", &other.pem);
        // libpq: with a root certificate file, `require` behaves as `verify-ca`.
        let url = server.url(
            "127.0.0.1",
            &format!("sslmode=require&sslrootcert={}", q(&wrong)),
        );
        assert!(connect(&url).await.is_err());
    }

    #[tokio::test]
    async fn a_server_without_tls_and_sslmode_require_is_a_clear_error() {
        let cluster = TempCluster::start().await.unwrap();
        let url = format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode=require",
            cluster.port()
        );
        let error = connect(&url).await.unwrap_err();
        assert!(error.contains("does not support TLS"), "{error}");
        // prefer falls back to a plain connection.
        let url = format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode=prefer",
            cluster.port()
        );
        assert_eq!(connect(&url).await, Ok(false));
    }

    #[tokio::test]
    async fn a_hostssl_only_server_is_reached_with_tls_and_refused_clearly_without() {
        let hba = "local all all trust\nhostssl all all 127.0.0.1/32 trust\n";
        let server = TlsServer::start(Some(hba)).await;
        assert_eq!(
            connect(&server.url("127.0.0.1", "sslmode=require")).await,
            Ok(true)
        );
        let error = connect(&server.url("127.0.0.1", "sslmode=disable"))
            .await
            .unwrap_err();
        assert!(error.contains("pg_hba.conf"), "{error}");
        assert!(error.contains("no encryption"), "{error}");
    }

    #[tokio::test]
    async fn a_client_certificate_is_accepted_by_a_clientcert_verify_full_line() {
        let hba = "local all all trust\n\
                   hostssl all all 127.0.0.1/32 trust clientcert=verify-full\n";
        let server = TlsServer::start(Some(hba)).await;
        let client = server.ca.sign("postgres", &[]);
        let cert = server.file("postgresql.crt", &client.cert);
        let key = server.file("postgresql.key", &client.key);
        let ca = server.ca_file();
        let url = server.url(
            "localhost",
            &format!(
                "sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
                q(&ca),
                q(&cert),
                q(&key)
            ),
        );
        assert_eq!(connect(&url).await, Ok(true));
        // Without it, the server refuses.
        let url = server.url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={}", q(&ca)),
        );
        let error = connect(&url).await.unwrap_err();
        assert!(error.contains("certificate"), "{error}");
        // A certificate without its key is a setup error naming both.
        let url = server.url(
            "localhost",
            &format!("sslmode=require&sslcert={}", q(&cert)),
        );
        let error = connect(&url).await.unwrap_err();
        assert!(
            error.contains("sslcert") && error.contains("sslkey"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn verify_full_without_any_ca_is_a_setup_error_as_in_libpq() {
        let server = TlsServer::start(None).await;
        let url = server.url("localhost", "sslmode=verify-full");
        let error = connect(&url).await.unwrap_err();
        assert!(error.contains("sslrootcert"), "{error}");
        // `system`: the public roots, which do not know this private CA.
        let url = server.url("localhost", "sslrootcert=system");
        let error = connect(&url).await.unwrap_err();
        assert!(error.contains("certificate"), "{error}");
        // ...and libpq refuses a weaker mode with it.
        let url = server.url("localhost", "sslrootcert=system&sslmode=require");
        let error = connect(&url).await.unwrap_err();
        assert!(error.contains("verify-full"), "{error}");
        // A missing CA file is named.
        let url = server.url(
            "localhost",
            "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        );
        let error = connect(&url).await.unwrap_err();
        assert!(error.contains("/nonexistent/ca.pem"), "{error}");
        let url = server.url("localhost", "sslmode=verify-everything");
        let error = connect(&url).await.unwrap_err();
        assert!(error.contains("verify-everything"), "{error}");
    }

    /// Marker for the child process of [`the_libpq_environment_selects_tls`].
    const CHILD_URL: &str = "SCHEDULER_TLS_TEST_CHILD_URL";

    #[tokio::test]
    async fn the_libpq_environment_selects_tls() {
        let server = TlsServer::start(None).await;
        let ca = server.ca_file();
        // The child's test name in this binary: this module's path without the crate's name.
        let (_, module) = module_path!().split_once("::").unwrap();
        let child = format!("{module}::environment_child");
        let run_with = |query: &str, envs: &[(&str, &str)]| {
            let output = Command::new(std::env::current_exe().unwrap())
                .args([child.as_str(), "--exact", "--nocapture"])
                .env(CHILD_URL, server.url("localhost", query))
                .envs(envs.iter().copied())
                .output()
                .unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            (output.status.success(), text)
        };
        let run = |envs: &[(&str, &str)]| run_with("application_name=env", envs);
        let ca = ca.to_string_lossy().into_owned();
        let (ok, text) = run(&[("PGSSLMODE", "verify-full"), ("PGSSLROOTCERT", &ca)]);
        assert!(ok && text.contains("child: Ok(true)"), "{text}");
        let other = Ca::new("someone else's CA");
        let wrong = server.file("other.crt", &other.pem);
        let (_, text) = run(&[
            ("PGSSLMODE", "verify-full"),
            ("PGSSLROOTCERT", &wrong.to_string_lossy()),
        ]);
        assert!(text.contains("child: Err("), "{text}");
        let (_, text) = run(&[("PGSSLMODE", "disable")]);
        assert!(text.contains("child: Ok(false)"), "{text}");
        // An invalid value is an error naming it, not a silent default.
        let (_, text) = run(&[("PGSSLMODE", "verify-everything")]);
        assert!(
            text.contains("child: Err(") && text.contains("PGSSLMODE"),
            "{text}"
        );
        // The URL wins over the environment.
        let (_, text) = run_with("sslmode=disable", &[("PGSSLMODE", "verify-full")]);
        assert!(text.contains("child: Ok(false)"), "{text}");
    }

    #[tokio::test]
    async fn environment_child() {
        let Ok(url) = std::env::var(CHILD_URL) else {
            return; // run by the test above only
        };
        println!("child: {:?}", connect(&url).await);
    }

    /// Secrets in a database URL and the connection log.
    mod secrets {
        use std::sync::{Arc, Mutex};

        use scheduler::store::{PgStore, Store};

        #[derive(Clone, Default)]
        struct Captured(Arc<Mutex<Vec<u8>>>);

        impl std::io::Write for Captured {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }

        /// sqlx logs a parameter it does not know with its value; the store takes such parameters
        /// out first, so neither `sslpassword` nor any other unknown one reaches the log of a real
        /// connect, and the warning names them without their values.
        #[test]
        fn sslpassword_and_unknown_parameters_never_reach_the_log() {
            let captured = Captured::default();
            let writer = captured.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_writer(move || writer.clone())
                .with_ansi(false)
                .finish();
            let _guard = tracing::subscriber::set_default(subscriber);
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let base = scheduler_tests::database_url();
            let sep = if base.contains('?') { '&' } else { '?' };
            let url = format!(
                "{base}{sep}sslpassword=Key-Pass-4417&keepalives_idle=Timeout-Secret-99&application_name=secrets"
            );
            runtime.block_on(async {
                let db = scheduler_tests::TestSchema::new("secrets").await;
                let store = PgStore::builder(url.as_str())
                    .schema(db.schema.clone())
                    .connect_lazy()
                    .unwrap();
                store.migrate().await.unwrap();
                store.pool().close().await;
                db.cleanup().await;
            });
            let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
            assert!(log.contains("sslpassword"), "the warning names it:\n{log}");
            assert!(log.contains("keepalives_idle"), "{log}");
            assert!(!log.contains("Key-Pass-4417"), "{log}");
            assert!(!log.contains("Timeout-Secret-99"), "{log}");
        }
    }
}
