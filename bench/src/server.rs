//! The servers and the database a run uses: `payd serve` as a child process (start, readiness,
//! RSS, graceful stop), the throwaway database it runs on, and the in-process actix-web
//! servers of the baselines (`serve_local!`).

use std::{
    collections::VecDeque,
    io::{BufRead, BufReader, Read, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{mpsc, Arc, Mutex},
    time::{Duration, Instant},
};

use actix_web::dev::ServerHandle;
use anyhow::{bail, Context as _};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};
use serde_json::Value;

use crate::{Args, DbKind};

pub(crate) const ADMIN_KEY: &str = "payd-bench-admin-key";
const DEFAULT_PG: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// Bounds every single wait on the server (start-up, stop, deliveries, passivation).
const START_LIMIT: Duration = Duration::from_secs(60);

/// A running `payd serve`.
pub(crate) struct Payd {
    child: Child,
    port: u16,
    /// The last lines it wrote to standard error.
    pub(crate) tail: Arc<Mutex<VecDeque<String>>>,
}

impl Payd {
    #[allow(clippy::zombie_processes)] // waited for by `stop` or `Drop`
    pub(crate) fn start(
        args: &Args,
        bin: &Path,
        db_url: &str,
        data_dir: &Path,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Payd> {
        let mut cmd = Command::new(bin);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PAYD_LISTEN", "127.0.0.1:0")
            .env("PAYD_DATABASE_URL", db_url)
            .env("PAYD_ADMIN_KEY", ADMIN_KEY)
            .env("PAYD_SANDBOX__DEMO_MERCHANT", "false")
            .env("PAYD_SANDBOX__DATA_DIR", data_dir)
            .env("PAYD_LOG__FORMAT", "json")
            // The per-key abuse limit (100/s by default) would measure itself, not payd.
            .env("PAYD_LIMITS__REQUESTS_PER_SECOND", "0")
            .envs(extra.iter().copied())
            .envs(args.payd_env.iter().map(|(k, v)| (k, v)))
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stderr = child.stderr.take().context("stderr")?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let (tx, rx) = mpsc::channel::<u16>();
        let sink = tail.clone();
        // Reads standard error to its end, so the pipe never fills and blocks payd.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if v["message"] == "payd listening" {
                        if let Some(port) = v["port"].as_u64() {
                            let _ = tx.send(port as u16);
                        }
                    }
                }
                let mut t = sink.lock().unwrap_or_else(|e| e.into_inner());
                if t.len() == 40 {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
        let deadline = Instant::now() + START_LIMIT;
        let port = loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(port) => break port,
                Err(_) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!(
                        "payd did not announce its port: {:?}",
                        tail.lock().unwrap_or_else(|e| e.into_inner())
                    );
                }
                Err(_) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        std::thread::sleep(Duration::from_millis(100));
                        bail!(
                            "payd exited with {status}: {:?}",
                            tail.lock().unwrap_or_else(|e| e.into_inner())
                        );
                    }
                }
            }
        };
        let payd = Payd { child, port, tail };
        payd.wait_until_serving(deadline)?;
        eprintln!(
            "payd-bench: payd pid {} serving on 127.0.0.1:{port}",
            payd.pid()
        );
        Ok(payd)
    }

    /// payd's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A bound port accepts before the server runs: poll until it answers HTTP.
    fn wait_until_serving(&self, deadline: Instant) -> anyhow::Result<()> {
        while Instant::now() < deadline {
            if let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                let req = "GET /health/live HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
                let mut answer = String::new();
                if conn.write_all(req.as_bytes()).is_ok()
                    && conn.read_to_string(&mut answer).is_ok()
                    && answer.starts_with("HTTP/1.1 200")
                {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("payd never answered on port {}", self.port)
    }

    /// Resident set size of the server process, in bytes.
    pub(crate) fn rss(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .context("VmRSS in /proc/<pid>/status")?;
        Ok(kb * 1024)
    }

    /// SIGTERM, then at most 30 s for a graceful exit (SIGKILL after).
    pub(crate) fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("payd-bench: payd did not stop on SIGTERM; killing it");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Payd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The database under test: its URL, and how to remove it.
pub(crate) struct TestDb {
    pub(crate) url: String,
    pub(crate) dir: PathBuf,
    pg: Option<(String, String)>,
}

impl TestDb {
    pub(crate) async fn create(kind: DbKind) -> anyhow::Result<TestDb> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = std::env::temp_dir().join(format!("payd-bench-{id}"));
        std::fs::create_dir_all(&dir)?;
        match kind {
            DbKind::Sqlite => Ok(TestDb {
                url: format!("sqlite://{}/payd.db?mode=rwc", dir.display()),
                dir,
                pg: None,
            }),
            DbKind::Postgres => {
                let base = std::env::var("PAYD_BENCH_DATABASE_URL")
                    .ok()
                    .filter(|u| !u.is_empty())
                    .unwrap_or_else(|| DEFAULT_PG.to_owned());
                let name = format!("payd_bench_{id}");
                let admin = Database::connect(&base)
                    .await
                    .with_context(|| format!("connecting to {base}"))?;
                admin
                    .execute_raw(Statement::from_string(
                        DbBackend::Postgres,
                        format!("CREATE DATABASE {name}"),
                    ))
                    .await?;
                admin.close().await.ok();
                let (head, query) = match base.split_once('?') {
                    Some((h, q)) => (h, format!("?{q}")),
                    None => (base.as_str(), String::new()),
                };
                let server = head.rsplit_once('/').map_or(head, |(s, _)| s);
                Ok(TestDb {
                    url: format!("{server}/{name}{query}"),
                    dir,
                    pg: Some((base.clone(), name)),
                })
            }
        }
    }

    pub(crate) async fn remove(self) {
        if let Some((base, name)) = &self.pg {
            match Database::connect(base).await {
                Ok(admin) => {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    if let Err(e) = admin
                        .execute_raw(Statement::from_string(DbBackend::Postgres, sql))
                        .await
                    {
                        eprintln!("payd-bench: could not drop {name}: {e}");
                    }
                    admin.close().await.ok();
                }
                Err(e) => eprintln!("payd-bench: could not drop {name}: {e}"),
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An in-process actix-web server on 127.0.0.1:0.
pub(crate) struct Local {
    pub(crate) url: String,
    pub(crate) handle: ServerHandle,
}

impl Local {
    pub(crate) async fn stop(self) {
        self.handle.stop(true).await;
    }
}

/// Binds an `HttpServer` to 127.0.0.1:0 and serves it in the background.
macro_rules! serve_local {
    ($server:expr) => {{
        let server = $server.bind(("127.0.0.1", 0))?;
        let port = server.addrs()[0].port();
        let server = server.run();
        let handle = server.handle();
        actix_web::rt::spawn(server);
        $crate::server::Local {
            url: format!("http://127.0.0.1:{port}"),
            handle,
        }
    }};
}
pub(crate) use serve_local;
