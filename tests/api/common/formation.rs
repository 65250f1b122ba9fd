//! A PostgreSQL failover pair on loopback, made with Debian's pg_auto_failover
//! (`postgresql-15-auto-failover`, `pg-auto-failover-cli`): a monitor, a primary and a
//! synchronous standby, each a `pg_autoctl` process group the test can kill whole. The
//! monitor's timeouts are shortened so that a lost primary is replaced in seconds rather than
//! a minute. `pg_autoctl` refuses to run as root: as root (CI), the nodes run as the user
//! `PAYD_FAILOVER_USER` (default `paydha`, made by `.ci/failover-setup.sh`) through `runuser`.
//!
//! It runs only when asked (`PAYD_FAILOVER_TESTS=1`, as `.ci/run` does): it takes about a
//! minute and a machine set up for it.

use std::{
    fs::File,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use sea_orm::sqlx::{Connection, PgConnection};

/// The monitor's health checks and timeouts (milliseconds), shortened from pg_auto_failover's
/// defaults (a 5 s check period, 20 s before a node is unhealthy, 30 s for a demotion).
const MONITOR_SETTINGS: &[(&str, u32)] = &[
    ("health_check_period", 1000),
    ("health_check_timeout", 1000),
    ("health_check_max_retries", 1),
    ("health_check_retry_delay", 500),
    ("node_considered_unhealthy_timeout", 2000),
    ("primary_demote_timeout", 3000),
];

/// A `pg_autoctl run` of one node (or the monitor), leader of its own process group.
struct Node {
    port: u16,
    pgdata: PathBuf,
    run: Option<Child>,
}

pub struct Formation {
    dir: tempfile::TempDir,
    /// The user the nodes run as, when the test runs as root.
    run_as: Option<String>,
    /// The database user: the one who made the nodes.
    db_user: String,
    bin: PathBuf,
    monitor: Node,
    nodes: Vec<Node>,
}

impl Formation {
    /// A formation with a primary and a synchronous standby when `PAYD_FAILOVER_TESTS=1`
    /// (CI); otherwise `None`, with a line on stderr saying how to run it. Asked for on a
    /// machine that cannot make one, it fails saying why.
    pub async fn start_if_asked() -> Option<Formation> {
        if std::env::var("PAYD_FAILOVER_TESTS").as_deref() != Ok("1") {
            eprintln!(
                "skipped: PAYD_FAILOVER_TESTS=1 runs it (as root, .ci/failover-setup.sh \
                 installs what it needs)"
            );
            return None;
        }
        let (bin, run_as, db_user) =
            Self::requirements().unwrap_or_else(|why| panic!("PAYD_FAILOVER_TESTS=1 but {why}"));
        Some(Self::start(bin, run_as, db_user).await)
    }

    /// The PostgreSQL binaries, the user to run as (root only) and the database user.
    fn requirements() -> Result<(PathBuf, Option<String>, String), String> {
        let installed = Command::new("pg_autoctl")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            return Err("pg_autoctl is not installed".into());
        }
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .map_err(|e| format!("no /usr/lib/postgresql: {e}"))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .max()
            .map(|v| PathBuf::from(format!("/usr/lib/postgresql/{v}/bin")))
            .ok_or("no PostgreSQL under /usr/lib/postgresql")?;
        let me = output(Command::new("id").arg("-un"))?;
        if me != "root" {
            return Ok((bin, None, me));
        }
        let user = std::env::var("PAYD_FAILOVER_USER").unwrap_or_else(|_| "paydha".into());
        if !Command::new("id")
            .arg("-u")
            .arg(&user)
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Err(format!(
                "no user {user} to run pg_autoctl as (it refuses root)"
            ));
        }
        Ok((bin, Some(user.clone()), user))
    }

    async fn start(bin: PathBuf, run_as: Option<String>, db_user: String) -> Formation {
        let dir = tempfile::Builder::new()
            .prefix("payd-failover-")
            .tempdir_in("/tmp")
            .expect("a directory for the formation");
        if let Some(user) = &run_as {
            output(Command::new("chown").arg(user).arg(dir.path())).expect("chown");
        }
        let mut f = Formation {
            monitor: Node::at(dir.path(), "monitor"),
            nodes: vec![Node::at(dir.path(), "node1"), Node::at(dir.path(), "node2")],
            dir,
            run_as,
            db_user,
            bin,
        };
        let common = |node: &Node| {
            let mut args: Vec<String> = ["--pgdata", &node.pgdata.display().to_string()]
                .map(str::to_owned)
                .to_vec();
            args.extend(
                [
                    "--pgport",
                    &node.port.to_string(),
                    "--hostname",
                    "127.0.0.1",
                    "--listen",
                    "127.0.0.1",
                    "--auth",
                    "trust",
                    "--no-ssl",
                ]
                .map(str::to_owned),
            );
            args
        };
        let args = common(&f.monitor);
        f.autoctl(&["create", "monitor"], &args);
        let pgdata = f.monitor.pgdata.display().to_string();
        f.monitor.run = Some(f.spawn("monitor", &["run", "--pgdata", &pgdata]));
        let mut monitor = f.connect(f.monitor.port, "pg_auto_failover").await;
        for (name, ms) in MONITOR_SETTINGS {
            // The names and values are this file's constants.
            sea_orm::sqlx::query(sea_orm::sqlx::AssertSqlSafe(format!(
                "ALTER SYSTEM SET pgautofailover.{name} = {ms}"
            )))
            .execute(&mut monitor)
            .await
            .expect("a monitor setting");
        }
        sea_orm::sqlx::query("SELECT pg_reload_conf()")
            .execute(&mut monitor)
            .await
            .expect("reload");
        let monitor_uri = f.autoctl(
            &["show", "uri", "--formation", "monitor"],
            &["--pgdata".into(), pgdata.clone()],
        );
        for (i, name) in ["node1", "node2"].into_iter().enumerate() {
            let mut args = common(&f.nodes[i]);
            args.extend(
                [
                    "--monitor",
                    &monitor_uri,
                    "--dbname",
                    "payd",
                    "--name",
                    name,
                    "--run",
                ]
                .map(str::to_owned),
            );
            let args: Vec<&str> = ["create", "postgres"]
                .into_iter()
                .chain(args.iter().map(String::as_str))
                .collect();
            f.nodes[i].run = Some(f.spawn(name, &args));
            let wanted: &[&str] = if i == 0 {
                &["single"]
            } else {
                &["primary", "secondary"]
            };
            f.settle(&mut monitor, wanted).await;
        }
        f
    }

    /// Waits (at most 90 s) until the nodes report exactly `states` (in any order) and have
    /// reached their goals. The standby's base backup waits for a checkpoint on the primary,
    /// which it would otherwise spread over minutes: one is asked for meanwhile.
    async fn settle(&self, monitor: &mut PgConnection, states: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let nodes: Vec<(String, String)> = sea_orm::sqlx::query_as(
                "SELECT reportedstate::text, goalstate::text FROM pgautofailover.node",
            )
            .fetch_all(&mut *monitor)
            .await
            .expect("the monitor's nodes");
            let mut reported: Vec<&str> = nodes
                .iter()
                .filter(|(r, g)| r == g)
                .map(|(r, _)| r.as_str())
                .collect();
            reported.sort_unstable();
            if reported == states && nodes.len() == states.len() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the formation never reached {states:?}: {nodes:?} (logs in {})",
                self.dir.path().display()
            );
            if let Ok(mut primary) = self.try_connect(self.nodes[0].port, "postgres").await {
                let _ = sea_orm::sqlx::query("CHECKPOINT")
                    .execute(&mut primary)
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The formation's URI as `pg_autoctl show uri` prints it, with the database user (the
    /// URI names none: libpq would take the OS user's name).
    pub fn url(&self) -> String {
        let pgdata = self.monitor.pgdata.display().to_string();
        let uri = self.autoctl(
            &["show", "uri", "--formation", "default"],
            &["--pgdata".into(), pgdata],
        );
        let rest = uri
            .strip_prefix("postgres://")
            .expect("pg_autoctl's URI is postgres://");
        format!("postgres://{}@{rest}", self.db_user)
    }

    /// Which node is the primary (index into the URI's hosts); a node that does not answer
    /// (killed) is not.
    pub async fn primary(&self) -> usize {
        for (i, node) in self.nodes.iter().enumerate() {
            let Ok(mut conn) = self.try_connect(node.port, "postgres").await else {
                continue;
            };
            let primary: bool = sea_orm::sqlx::query_scalar("SELECT NOT pg_is_in_recovery()")
                .fetch_one(&mut conn)
                .await
                .expect("recovery state");
            if primary {
                return i;
            }
        }
        panic!("no primary in the formation")
    }

    /// The primary's `synchronous_standby_names` (empty: asynchronous replication).
    pub async fn synchronous_standbys(&self, node: usize) -> String {
        let mut conn = self.connect(self.nodes[node].port, "postgres").await;
        sea_orm::sqlx::query_scalar("SHOW synchronous_standby_names")
            .fetch_one(&mut conn)
            .await
            .expect("synchronous_standby_names")
    }

    /// Whether `node` takes a committed write now (within half a second).
    pub async fn takes_writes(&self, node: usize) -> bool {
        let write = async {
            let mut conn = self.try_connect(self.nodes[node].port, "postgres").await?;
            sea_orm::sqlx::query(
                "CREATE TABLE IF NOT EXISTS failover_probe (at timestamptz DEFAULT now())",
            )
            .execute(&mut conn)
            .await?;
            sea_orm::sqlx::query("INSERT INTO failover_probe DEFAULT VALUES")
                .execute(&mut conn)
                .await?;
            Ok::<(), sea_orm::sqlx::Error>(())
        };
        matches!(
            tokio::time::timeout(Duration::from_millis(500), write).await,
            Ok(Ok(()))
        )
    }

    /// SIGKILLs every process of `node`: its keeper, the keeper's children and the
    /// postmaster (whose backends leave when they see it gone). Returns once its port refuses
    /// connections.
    pub async fn kill(&mut self, node: usize) {
        let port = self.nodes[node].port;
        self.nodes[node].kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            assert!(Instant::now() < deadline, "node {node} still answers");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn connect(&self, port: u16, database: &str) -> PgConnection {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.try_connect(port, database).await {
                Ok(conn) => return conn,
                Err(e) => assert!(
                    Instant::now() < deadline,
                    "no PostgreSQL on port {port}: {e}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn try_connect(
        &self,
        port: u16,
        database: &str,
    ) -> Result<PgConnection, sea_orm::sqlx::Error> {
        let url = format!(
            "postgres://{}@127.0.0.1:{port}/{database}?sslmode=disable",
            self.db_user
        );
        PgConnection::connect(&url).await
    }

    /// `pg_autoctl` as the formation's user, with an environment of its own: HOME and the XDG
    /// directories inside the formation's directory, PostgreSQL's binaries first in PATH.
    fn command(&self, args: &[&str]) -> Command {
        let dir = self.dir.path().display();
        let env = [
            format!("HOME={dir}"),
            format!("XDG_CONFIG_HOME={dir}/config"),
            format!("XDG_DATA_HOME={dir}/data"),
            format!("XDG_RUNTIME_DIR={dir}/run"),
            format!("PATH={}:/usr/bin:/bin", self.bin.display()),
        ];
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--", "env", "-i"]);
                c
            }
            None => {
                let mut c = Command::new("env");
                c.arg("-i");
                c
            }
        };
        cmd.args(env).arg("pg_autoctl").args(args);
        cmd
    }

    /// Runs a `pg_autoctl` command to its end; its standard output, trimmed.
    fn autoctl(&self, verb: &[&str], args: &[String]) -> String {
        let args: Vec<&str> = verb
            .iter()
            .copied()
            .chain(args.iter().map(String::as_str))
            .collect();
        output(&mut self.command(&args)).unwrap_or_else(|e| panic!("pg_autoctl {args:?}: {e}"))
    }

    /// Starts a long-running `pg_autoctl` command in a process group of its own, its output in
    /// `<name>.log` in the formation's directory.
    fn spawn(&self, name: &str, args: &[&str]) -> Child {
        let log = File::create(self.dir.path().join(format!("{name}.log"))).expect("log file");
        self.command(args)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("pg_autoctl started")
    }
}

impl Node {
    fn at(dir: &Path, name: &str) -> Node {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        Node {
            port,
            pgdata: dir.join(name),
            run: None,
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.run.take() {
            // The process group: the keeper, its children and the postmaster.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            // Reaped, so no zombie is left (bounded: a kill that failed shows in `kill`'s
            // caller, which waits for the port to close).
            for _ in 0..100 {
                if !matches!(child.try_wait(), Ok(None)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Drop for Formation {
    fn drop(&mut self) {
        // A failed test's formation is left running for a look with `PAYD_KEEP_FORMATION=1`.
        if std::thread::panicking() && std::env::var_os("PAYD_KEEP_FORMATION").is_some() {
            self.dir.disable_cleanup(true);
            eprintln!(
                "formation kept in {}: monitor on port {}, nodes on {:?}",
                self.dir.path().display(),
                self.monitor.port,
                self.nodes.iter().map(|n| n.port).collect::<Vec<_>>()
            );
            return;
        }
        for node in self.nodes.iter_mut().chain([&mut self.monitor]) {
            node.kill();
        }
    }
}

/// A command's standard output, trimmed; its standard error when it fails.
fn output(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
