//! `payd-bench`: measures the real `payd` release binary against baselines on the same
//! machine and database, and prints (or writes into `docs/performance.md`) a markdown table.
//!
//! ```sh
//! cargo build --release --bin payd --bin payd-bench
//! cargo run --release --bin payd-bench -- --db sqlite|postgres [--seconds N] [--concurrency N] \
//!     [--write docs/performance.md]
//! ```
//!
//! Baselines: raw single-row INSERTs through SeaORM (`payd::db::connect`, one INSERT per
//! transaction), an empty actix-web route, and raw awc POSTs to a local 2xx receiver. Then the
//! real `payd` (the binary next to this one) as a child process: create+confirm, a paced run at
//! half of that rate, the manual-capture flow, refunds, a mixed workload, webhook deliveries,
//! and the RSS of live payment actors before and after passivation. All traffic stays on
//! 127.0.0.1; every phase and every wait is bounded in time.

use std::{
    cell::{Cell, RefCell},
    collections::{HashSet, VecDeque},
    future::Future,
    io::{BufRead, BufReader, Read, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    rc::Rc,
    sync::{
        atomic::{AtomicU64, Ordering},
        mpsc, Arc, Mutex,
    },
    time::{Duration, Instant},
};

use actix_web::{dev::ServerHandle, web, App, HttpRequest, HttpResponse, HttpServer};
use anyhow::{anyhow, bail, Context as _};
use awc::http::Method;
use clap::{Parser, ValueEnum};
use payd::clock::{Clock, SystemClock};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement, TransactionTrait};
use serde_json::{json, Value};

const ADMIN_KEY: &str = "payd-bench-admin-key";
const DEFAULT_PG: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// Bounds every single wait on the server (start-up, stop, deliveries, passivation).
const START_LIMIT: Duration = Duration::from_secs(60);
const WEBHOOK_LIMIT: Duration = Duration::from_secs(120);
/// payd's webhook settings for the run (see the webhook phase).
const BENCH_WEBHOOKS: [(&str, &str); 2] = [
    ("PAYD_WEBHOOKS__REQUEST_TIMEOUT_SECS", "60"),
    ("PAYD_WEBHOOKS__LEASE_SECS", "180"),
];
const BEGIN: &str = "<!-- payd-bench:";
/// Plain reads on the memory server before its first RSS reading.
const WARM_READS: usize = 5_000;

#[derive(Parser, Clone)]
#[command(
    name = "payd-bench",
    about = "Benchmarks the payd release binary against raw baselines"
)]
struct Args {
    /// Which database payd (and the raw-insert baseline) runs on.
    #[arg(long, value_enum)]
    db: DbKind,
    /// Length of each timed phase.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Requests in flight in every closed-loop phase (baselines included).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Replace this database's section of a markdown file (created if missing).
    #[arg(long)]
    write: Option<PathBuf>,
    /// Live payment actors for the memory phase.
    #[arg(long, default_value_t = 100_000)]
    actors: usize,
    /// Payments (each one event) for the webhook phase.
    #[arg(long, default_value_t = 3_000)]
    webhook_events: usize,
    /// After passivation, touch every payment again and read RSS once more (shows whether
    /// the memory the first actors held is reused).
    #[arg(long)]
    retouch: bool,
    /// Run only these phases (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    phases: Vec<Phase>,
    /// A setting for the payd servers the bench starts, as `PAYD_…=value` (repeatable); it
    /// overrides the bench's own. For A/B runs of a setting; the report lists it.
    #[arg(long = "payd-env", value_parser = payd_setting)]
    payd_env: Vec<(String, String)>,
}

fn payd_setting(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if k.starts_with("PAYD_") => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected PAYD_NAME=value, got {s:?}")),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
enum DbKind {
    Sqlite,
    Postgres,
}

impl DbKind {
    fn title(self) -> &'static str {
        match self {
            DbKind::Sqlite => "SQLite",
            DbKind::Postgres => "PostgreSQL",
        }
    }

    fn key(self) -> &'static str {
        match self {
            DbKind::Sqlite => "sqlite",
            DbKind::Postgres => "postgres",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
enum Phase {
    Inserts,
    EmptyRoute,
    Awc,
    Confirm,
    Paced,
    Manual,
    Refund,
    Mixed,
    Webhooks,
    Memory,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    actix_web::rt::System::new().block_on(run(args))
}

// ---------------------------------------------------------------------------------------------
// Load generator

/// What one operation of a phase came to.
enum Outcome {
    Ok,
    Failed(String),
    /// Nothing left to do (e.g. no payment left to refund): this worker stops.
    Exhausted,
}

/// The result of one timed phase.
#[derive(Default, Clone)]
struct Stats {
    ok: u64,
    errors: u64,
    first_error: Option<String>,
    elapsed: Duration,
    /// Latencies of the successful operations, in microseconds, sorted.
    lat_us: Vec<u64>,
}

impl Stats {
    fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn pct_ms(&self, p: f64) -> f64 {
        if self.lat_us.is_empty() {
            return f64::NAN;
        }
        let i = ((p / 100.0) * (self.lat_us.len() - 1) as f64).round() as usize;
        self.lat_us[i.min(self.lat_us.len() - 1)] as f64 / 1000.0
    }

    fn summary(&self) -> String {
        let mut s = format!(
            "{} ok in {:.1} s, p50 {:.2} ms, p99 {:.2} ms",
            self.ok,
            self.elapsed.as_secs_f64(),
            self.pct_ms(50.0),
            self.pct_ms(99.0)
        );
        if self.errors > 0 {
            s.push_str(&format!(
                ", {} errors (first: {})",
                self.errors,
                self.first_error.as_deref().unwrap_or("")
            ));
        }
        s
    }
}

/// Runs `op` from `concurrency` tasks on this thread until `limit` has passed (or every task
/// is exhausted). With `pace` (operations a second) operation k starts at `k / pace` s and its
/// latency counts from that planned start, so a slow answer is not hidden by a late start.
async fn drive<F, Fut>(concurrency: usize, limit: Duration, pace: Option<f64>, op: F) -> Stats
where
    F: Fn(u64) -> Fut + 'static,
    Fut: Future<Output = Outcome> + 'static,
{
    let op = Rc::new(op);
    let stats = Rc::new(RefCell::new(Stats::default()));
    let next = Rc::new(Cell::new(0u64));
    let start = Instant::now();
    let deadline = start + limit;
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency.max(1) {
        let (op, stats, next) = (op.clone(), stats.clone(), next.clone());
        tasks.push(actix_web::rt::spawn(async move {
            loop {
                let k = next.get();
                next.set(k + 1);
                let planned = match pace {
                    Some(rate) => {
                        let at = start + Duration::from_secs_f64(k as f64 / rate);
                        if at >= deadline {
                            break;
                        }
                        actix_web::rt::time::sleep_until(at.into()).await;
                        at
                    }
                    None => {
                        let now = Instant::now();
                        if now >= deadline {
                            break;
                        }
                        now
                    }
                };
                let outcome = op(k).await;
                let took = planned.elapsed();
                let mut s = stats.borrow_mut();
                match outcome {
                    Outcome::Ok => {
                        s.ok += 1;
                        s.lat_us.push(took.as_micros() as u64);
                    }
                    Outcome::Failed(e) => {
                        s.errors += 1;
                        s.first_error.get_or_insert(e);
                    }
                    Outcome::Exhausted => break,
                }
            }
        }));
    }
    futures_util::future::join_all(tasks).await;
    let mut s = stats.take();
    s.elapsed = start.elapsed();
    s.lat_us.sort_unstable();
    s
}

fn client() -> awc::Client {
    awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .disable_redirects()
        .connector(awc::Connector::new().limit(1024))
        .finish()
}

/// Sends one request; `Ok` only for a 2xx, with the body.
async fn send(
    client: &awc::Client,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<web::Bytes>,
) -> Result<web::Bytes, String> {
    let mut req = client.request(method, url);
    for (k, v) in headers {
        req = req.insert_header((*k, *v));
    }
    let res = match body {
        Some(b) => {
            req.insert_header(("content-type", "application/json"))
                .send_body(b)
                .await
        }
        None => req.send().await,
    };
    let mut res = res.map_err(|e| format!("{url}: {e}"))?;
    let body = res
        .body()
        .limit(16 << 20)
        .await
        .map_err(|e| format!("{url}: body: {e}"))?;
    if !res.status().is_success() {
        return Err(format!(
            "{url}: {} {}",
            res.status().as_u16(),
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ));
    }
    Ok(body)
}

// ---------------------------------------------------------------------------------------------
// payd, as a child process

/// A running `payd serve`.
struct Payd {
    child: Child,
    port: u16,
    /// The last lines it wrote to standard error.
    tail: Arc<Mutex<VecDeque<String>>>,
}

impl Payd {
    #[allow(clippy::zombie_processes)] // waited for by `stop` or `Drop`
    fn start(
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

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn base(&self) -> String {
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
    fn rss(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .context("VmRSS in /proc/<pid>/status")?;
        Ok(kb * 1024)
    }

    /// SIGTERM, then at most 30 s for a graceful exit (SIGKILL after).
    fn stop(&mut self) {
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

/// A merchant's secret key and shop, as the merchant's server uses them.
#[derive(Clone)]
struct Api {
    client: awc::Client,
    base: Rc<str>,
    key: Rc<str>,
    profile: Rc<str>,
}

impl Api {
    async fn create_merchant(client: &awc::Client, base: &str, name: &str) -> anyhow::Result<Api> {
        let body = send(
            client,
            Method::POST,
            &format!("{base}/admin/merchants"),
            &[("api-key", ADMIN_KEY)],
            Some(serde_json::to_vec(&json!({ "name": name }))?.into()),
        )
        .await
        .map_err(|e| anyhow!(e))?;
        let v: Value = serde_json::from_slice(&body)?;
        let s = |f: &str| v[f].as_str().map(Rc::from).context("merchant field");
        Ok(Api {
            client: client.clone(),
            base: base.into(),
            key: s("secret_key")?,
            profile: s("profile_id")?,
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<web::Bytes>,
    ) -> Result<web::Bytes, String> {
        let url = format!("{}{path}", self.base);
        send(
            &self.client,
            method,
            &url,
            &[("api-key", &self.key), ("x-profile-id", &self.profile)],
            body,
        )
        .await
    }

    /// POST /payments; returns (payment_id, status).
    async fn create(&self, body: web::Bytes) -> Result<(String, String), String> {
        let raw = self.call(Method::POST, "/payments", Some(body)).await?;
        let v: Value = serde_json::from_slice(&raw).map_err(|e| e.to_string())?;
        let id = v["payment_id"].as_str().ok_or("no payment_id")?.to_owned();
        let status = v["status"].as_str().unwrap_or("").to_owned();
        Ok((id, status))
    }

    async fn create_expect(&self, body: web::Bytes, status: &str) -> Result<String, String> {
        let (id, got) = self.create(body).await?;
        if got != status {
            return Err(format!("payment {id} is {got}, expected {status}"));
        }
        Ok(id)
    }
}

fn payment_body(confirm: bool, manual: bool) -> web::Bytes {
    let mut v = json!({"amount": 1000, "currency": "USD"});
    if confirm {
        v["confirm"] = json!(true);
        v["payment_method_data"] = json!({"card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2035, "cvc": "123"}});
    }
    if manual {
        v["capture_method"] = json!("manual");
    }
    serde_json::to_vec(&v).expect("json").into()
}

fn outcome<T>(r: Result<T, String>) -> Outcome {
    match r {
        Ok(_) => Outcome::Ok,
        Err(e) => Outcome::Failed(e),
    }
}

/// `payd_actors_live{kind="payment"}` from /metrics.
async fn live_actors(client: &awc::Client, base: &str) -> Option<u64> {
    let body = send(client, Method::GET, &format!("{base}/metrics"), &[], None)
        .await
        .ok()?;
    String::from_utf8_lossy(&body)
        .lines()
        .filter(|l| l.starts_with("payd_actors_live") && l.contains("payment"))
        .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
}

// ---------------------------------------------------------------------------------------------
// In-process servers: the empty route and the 2xx receiver

/// An in-process actix-web server on 127.0.0.1:0.
struct Local {
    url: String,
    handle: ServerHandle,
}

impl Local {
    async fn stop(self) {
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
        Local {
            url: format!("http://127.0.0.1:{port}"),
            handle,
        }
    }};
}

/// What the receiver has seen: raw POSTs counted, webhook deliveries by distinct `webhook-id`.
/// While `held`, webhook requests wait (bounded) until `release`.
#[derive(Default)]
struct Received {
    raw: AtomicU64,
    hooks: Mutex<Hooks>,
    held: std::sync::atomic::AtomicBool,
    opened: tokio::sync::Notify,
}

impl Received {
    fn release(&self) {
        self.held.store(false, Ordering::SeqCst);
        self.opened.notify_waiters();
    }
}

#[derive(Default)]
struct Hooks {
    ids: HashSet<String>,
    last: Option<Instant>,
    requests: u64,
}

async fn receive_raw(state: web::Data<Received>, _body: web::Bytes) -> HttpResponse {
    state.raw.fetch_add(1, Ordering::Relaxed);
    HttpResponse::NoContent().finish()
}

async fn receive_hook(
    req: HttpRequest,
    state: web::Data<Received>,
    _body: web::Bytes,
) -> HttpResponse {
    let deadline = Instant::now() + WEBHOOK_LIMIT;
    while state.held.load(Ordering::SeqCst) && Instant::now() < deadline {
        let opened = state.opened.notified();
        if !state.held.load(Ordering::SeqCst) {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), opened).await;
    }
    let id = req
        .headers()
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let now = Instant::now();
    let mut h = state.hooks.lock().unwrap_or_else(|e| e.into_inner());
    h.requests += 1;
    if !id.is_empty() && h.ids.insert(id) {
        h.last = Some(now);
    }
    HttpResponse::NoContent().finish()
}

// ---------------------------------------------------------------------------------------------
// The run

/// Everything one run measured.
#[derive(Default)]
struct Report {
    raw_inserts: Option<Stats>,
    empty_route: Option<Stats>,
    awc_full: Option<Stats>,
    awc_4: Option<Stats>,
    confirm: Option<Stats>,
    paced: Option<(f64, Stats)>,
    manual: Option<Stats>,
    refund: Option<Stats>,
    mixed: Option<Stats>,
    webhooks: Option<WebhookRun>,
    memory: Option<MemoryRun>,
    payd_version: Option<String>,
    /// POSTs the receiver counted during the raw awc phases.
    raw_counted: u64,
    noise: Noise,
}

struct WebhookRun {
    events: usize,
    received: usize,
    requests: u64,
    create_secs: f64,
    /// From opening the receiver to the last distinct event received.
    drain_secs: f64,
}

impl WebhookRun {
    fn rate(&self) -> f64 {
        self.received as f64 / self.drain_secs.max(1e-9)
    }
}

struct MemoryRun {
    payments: usize,
    create_secs: f64,
    touch: Stats,
    idle_timeout_secs: u64,
    rss_fresh: u64,
    rss_live: u64,
    live: u64,
    rss_passivated: u64,
    live_after: u64,
    passivate_secs: f64,
    /// With `--retouch`: live actors and RSS after touching every payment again.
    retouched: Option<(u64, u64)>,
}

impl MemoryRun {
    fn per_actor(&self) -> f64 {
        self.rss_live.saturating_sub(self.rss_fresh) as f64 / self.live.max(1) as f64
    }

    fn returned(&self) -> f64 {
        let grown = self.rss_live.saturating_sub(self.rss_fresh) as f64;
        self.rss_live.saturating_sub(self.rss_passivated) as f64 / grown.max(1.0)
    }
}

/// The database under test: its URL, and how to remove it.
struct TestDb {
    url: String,
    dir: PathBuf,
    pg: Option<(String, String)>,
}

impl TestDb {
    async fn create(kind: DbKind) -> anyhow::Result<TestDb> {
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

    async fn remove(self) {
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

async fn run(args: Args) -> anyhow::Result<()> {
    let bin = std::env::current_exe()?.with_file_name("payd");
    if !bin.exists() {
        bail!(
            "{} not found: build it with `cargo build --release --bin payd --bin payd-bench`",
            bin.display()
        );
    }
    let db = TestDb::create(args.db).await?;
    eprintln!("payd-bench: database {}", db.url);
    let mut report = Report {
        noise: Noise::begin(),
        ..Report::default()
    };
    let result = measure(&args, &bin, &db, &mut report).await;
    report.noise.end();
    db.remove().await;
    result?;
    let section = render(&args, &report);
    println!("{section}");
    if let Some(path) = &args.write {
        write_section(path, args.db, &section)?;
        eprintln!(
            "payd-bench: wrote the {} section of {}",
            args.db.title(),
            path.display()
        );
    }
    Ok(())
}

fn wants(args: &Args, phase: Phase) -> bool {
    args.phases.is_empty() || args.phases.contains(&phase)
}

async fn measure(args: &Args, bin: &Path, db: &TestDb, report: &mut Report) -> anyhow::Result<()> {
    let secs = Duration::from_secs(args.seconds);
    let c = args.concurrency;
    let client = client();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());

    // (a) raw single-row INSERTs, one per transaction, with payd's own connection settings.
    if wants(args, Phase::Inserts) {
        eprintln!("payd-bench: raw single-row inserts");
        report.raw_inserts = Some(raw_inserts(&db.url, c, secs).await?);
    }

    // (b) an empty actix-web route, driven like payd (same body as create+confirm).
    if wants(args, Phase::EmptyRoute) {
        eprintln!("payd-bench: empty actix-web route");
        let local = serve_local!(HttpServer::new(|| {
            App::new().default_service(web::to(|| async { HttpResponse::Ok().finish() }))
        })
        .workers(cores));
        let (client2, url, body) = (client.clone(), local.url.clone(), payment_body(true, false));
        let stats = drive(c, secs, None, move |_| {
            let (client, url, body) = (client2.clone(), url.clone(), body.clone());
            async move { outcome(send(&client, Method::POST, &url, &[], Some(body)).await) }
        })
        .await;
        local.stop().await;
        report.empty_route = Some(stats);
    }

    // The receiver: raw POSTs and payd's webhook deliveries.
    let received = web::Data::new(Received::default());
    let recv_state = received.clone();
    let receiver = serve_local!(HttpServer::new(move || {
        App::new()
            .app_data(recv_state.clone())
            .route("/raw", web::post().to(receive_raw))
            .route("/hooks", web::post().to(receive_hook))
    })
    .workers(1));

    // (c) raw awc POSTs of an event-sized body to the receiver.
    if wants(args, Phase::Awc) {
        eprintln!("payd-bench: raw awc POSTs");
        let body: web::Bytes = serde_json::to_vec(&json!({
            "merchant_id": "mer_0", "event_id": "evt_0", "event_type": "payment_succeeded",
            "timestamp": "2026-01-01T00:00:00.000000Z",
            "content": {"type": "payment_details", "object": {"pad": "x".repeat(1400)}}
        }))?
        .into();
        let url = format!("{}/raw", receiver.url);
        for (n, limit, slot) in [(c, secs, 0), (4, secs / 2, 1)] {
            let (client2, url, body) = (client.clone(), url.clone(), body.clone());
            let stats = drive(n, limit.max(Duration::from_secs(1)), None, move |_| {
                let (client, url, body) = (client2.clone(), url.clone(), body.clone());
                async move {
                    let headers = [
                        ("webhook-id", "evt_0"),
                        ("webhook-timestamp", "1767225600"),
                        (
                            "webhook-signature",
                            "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                        ),
                    ];
                    outcome(send(&client, Method::POST, &url, &headers, Some(body)).await)
                }
            })
            .await;
            if slot == 0 {
                report.awc_full = Some(stats);
            } else {
                report.awc_4 = Some(stats);
            }
        }
    }

    report.raw_counted = received.raw.load(Ordering::Relaxed);

    let payd_phases = [
        Phase::Confirm,
        Phase::Paced,
        Phase::Manual,
        Phase::Refund,
        Phase::Mixed,
        Phase::Webhooks,
        Phase::Memory,
    ];
    if payd_phases.iter().any(|p| wants(args, *p)) {
        let result = measure_payd(args, bin, db, report, &client, &receiver.url, &received).await;
        receiver.stop().await;
        result?;
    } else {
        receiver.stop().await;
    }
    Ok(())
}

const RAW_TABLE: &str = "payd_bench_raw";

async fn raw_inserts(url: &str, concurrency: usize, limit: Duration) -> anyhow::Result<Stats> {
    let conn = payd::db::connect(url, None).await?;
    let backend = conn.get_database_backend();
    conn.execute_raw(Statement::from_string(
        backend,
        format!(
            "CREATE TABLE {RAW_TABLE} (id VARCHAR(64) PRIMARY KEY, merchant_id VARCHAR(64) NOT NULL, \
             amount BIGINT NOT NULL, status VARCHAR(32) NOT NULL, payload TEXT NOT NULL, \
             created_at VARCHAR(40) NOT NULL)"
        ),
    ))
    .await?;
    let sql = match backend {
        DbBackend::Postgres => format!(
            "INSERT INTO {RAW_TABLE} (id, merchant_id, amount, status, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6)"
        ),
        _ => format!(
            "INSERT INTO {RAW_TABLE} (id, merchant_id, amount, status, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)"
        ),
    };
    let payload = Rc::new("x".repeat(600));
    let (conn2, sql) = (conn.clone(), Rc::new(sql));
    let stats = drive(concurrency, limit, None, move |_| {
        let (conn, sql, payload) = (conn2.clone(), sql.clone(), payload.clone());
        async move {
            let stmt = Statement::from_sql_and_values(
                backend,
                sql.as_str(),
                [
                    format!("raw_{}", uuid::Uuid::now_v7().simple()).into(),
                    "mer_bench".into(),
                    1000i64.into(),
                    "succeeded".into(),
                    payload.as_str().into(),
                    SystemClock.now().to_rfc3339().into(),
                ],
            );
            let r = async {
                let txn = conn.begin().await?;
                txn.execute_raw(stmt).await?;
                txn.commit().await
            }
            .await;
            outcome(r.map_err(|e| e.to_string()))
        }
    })
    .await;
    conn.execute_raw(Statement::from_string(
        backend,
        format!("DROP TABLE {RAW_TABLE}"),
    ))
    .await?;
    conn.close().await?;
    Ok(stats)
}

#[allow(clippy::too_many_arguments)]
async fn measure_payd(
    args: &Args,
    bin: &Path,
    db: &TestDb,
    report: &mut Report,
    client: &awc::Client,
    receiver: &str,
    received: &web::Data<Received>,
) -> anyhow::Result<()> {
    let secs = Duration::from_secs(args.seconds);
    let c = args.concurrency;
    let data_dir = db.dir.join("data");
    // The webhook phase's receiver holds its first requests while the payments are created:
    // a timeout (and a lease) longer than that keeps them from being retried meanwhile.
    let mut payd = Payd::start(args, bin, &db.url, &data_dir, &BENCH_WEBHOOKS)?;
    let base = payd.base();
    if let Ok(v) = send(client, Method::GET, &format!("{base}/version"), &[], None).await {
        let v: Value = serde_json::from_slice(&v).unwrap_or_default();
        report.payd_version = v["version"].as_str().map(str::to_owned);
    }
    let api = Api::create_merchant(client, &base, "bench").await?;
    // Captured payments, for the refund phase.
    let captured: Rc<RefCell<Vec<String>>> = Rc::default();

    let auto_body = payment_body(true, false);
    let create_confirm = {
        let (api, body, captured) = (api.clone(), auto_body.clone(), captured.clone());
        move |_k: u64| {
            let (api, body, captured) = (api.clone(), body.clone(), captured.clone());
            async move {
                match api.create_expect(body, "succeeded").await {
                    Ok(id) => {
                        captured.borrow_mut().push(id);
                        Outcome::Ok
                    }
                    Err(e) => Outcome::Failed(e),
                }
            }
        }
    };

    if wants(args, Phase::Confirm) {
        eprintln!("payd-bench: create+confirm");
        let stats = drive(c, secs, None, create_confirm.clone()).await;
        eprintln!("payd-bench:   {}", stats.summary());
        report.confirm = Some(stats);
    }

    if wants(args, Phase::Paced) {
        if let Some(max) = report
            .confirm
            .as_ref()
            .map(Stats::rate)
            .filter(|r| *r > 0.0)
        {
            let rate = max / 2.0;
            eprintln!("payd-bench: create+confirm paced at {rate:.0}/s");
            let stats = drive(c, secs, Some(rate), create_confirm.clone()).await;
            eprintln!("payd-bench:   {}", stats.summary());
            report.paced = Some((rate, stats));
        }
    }

    if wants(args, Phase::Manual) {
        eprintln!("payd-bench: manual capture (create+confirm, then capture)");
        let (api2, body, captured2) = (api.clone(), payment_body(true, true), captured.clone());
        let stats = drive(c, secs, None, move |_| {
            let (api, body, captured) = (api2.clone(), body.clone(), captured2.clone());
            async move {
                let r = async {
                    let id = api.create_expect(body, "requires_capture").await?;
                    let path = format!("/payments/{id}/capture");
                    api.call(Method::POST, &path, Some(web::Bytes::from_static(b"{}")))
                        .await?;
                    captured.borrow_mut().push(id);
                    Ok::<_, String>(())
                }
                .await;
                outcome(r)
            }
        })
        .await;
        eprintln!("payd-bench:   {}", stats.summary());
        report.manual = Some(stats);
    }

    if wants(args, Phase::Refund) {
        if captured.borrow().is_empty() {
            eprintln!("payd-bench: creating payments to refund");
            let n = 2_000u64;
            drive(c, secs, None, {
                let f = create_confirm.clone();
                move |k| {
                    let fut = (k < n).then(|| f(k));
                    async move {
                        match fut {
                            Some(fut) => fut.await,
                            None => Outcome::Exhausted,
                        }
                    }
                }
            })
            .await;
        }
        eprintln!(
            "payd-bench: refunds ({} captured payments available)",
            captured.borrow().len()
        );
        let (api2, captured2) = (api.clone(), captured.clone());
        let stats = drive(c, secs, None, move |_| {
            let (api, id) = (api2.clone(), captured2.borrow_mut().pop());
            async move {
                let Some(id) = id else {
                    return Outcome::Exhausted;
                };
                let body = format!(r#"{{"payment_id":"{id}"}}"#);
                outcome(api.call(Method::POST, "/refunds", Some(body.into())).await)
            }
        })
        .await;
        eprintln!("payd-bench:   {}", stats.summary());
        report.refund = Some(stats);
    }

    if wants(args, Phase::Mixed) {
        eprintln!("payd-bench: mixed workload");
        report.mixed = Some(mixed(&api, c, secs).await);
        eprintln!(
            "payd-bench:   {}",
            report
                .mixed
                .as_ref()
                .map(Stats::summary)
                .unwrap_or_default()
        );
    }

    if wants(args, Phase::Webhooks) {
        eprintln!(
            "payd-bench: webhook deliveries ({} events)",
            args.webhook_events
        );
        report.webhooks = Some(webhooks(&api, c, args.webhook_events, receiver, received).await?);
    }

    if wants(args, Phase::Memory) {
        // The payments are created here (no actor is involved); the actors live in a fresh
        // server whose idle timeout lets them all be live at once, then passivate.
        eprintln!("payd-bench: memory: creating {} payments", args.actors);
        let owner = Api::create_merchant(client, &base, "bench-memory").await?;
        let ids: Rc<RefCell<Vec<String>>> = Rc::default();
        let n = args.actors as u64;
        let (owner2, ids2, body) = (owner.clone(), ids.clone(), payment_body(false, false));
        let created = drive(c, Duration::from_secs(600), None, move |k| {
            let (api, ids, body) = (owner2.clone(), ids2.clone(), body.clone());
            async move {
                if k >= n {
                    return Outcome::Exhausted;
                }
                match api.create(body).await {
                    Ok((id, _)) => {
                        ids.borrow_mut().push(id);
                        Outcome::Ok
                    }
                    Err(e) => Outcome::Failed(e),
                }
            }
        })
        .await;
        eprintln!("payd-bench:   {}", created.summary());
        let ids = Rc::new(ids.take());
        // Plain reads cost what a touch costs (the key, then the payment): their rate sets
        // the idle timeout of the memory server.
        let reads = read_all(&owner, &ids, 10_000, false, c, Duration::from_secs(60)).await;
        eprintln!("payd-bench:   reads: {}", reads.summary());
        payd.stop();
        report.memory = Some(
            memory(
                args, bin, db, &data_dir, client, &owner, ids, &created, &reads,
            )
            .await?,
        );
    } else {
        payd.stop();
    }
    Ok(())
}

/// GETs the first `n` of `ids` (with `force_sync=true`: through their actors).
async fn read_all(
    api: &Api,
    ids: &Rc<Vec<String>>,
    n: usize,
    force_sync: bool,
    c: usize,
    limit: Duration,
) -> Stats {
    let n = n.min(ids.len()) as u64;
    let (api, ids) = (api.clone(), ids.clone());
    let query = if force_sync { "?force_sync=true" } else { "" };
    drive(c, limit, None, move |k| {
        let (api, ids) = (api.clone(), ids.clone());
        async move {
            if k >= n {
                return Outcome::Exhausted;
            }
            let path = format!("/payments/{}{query}", ids[k as usize]);
            outcome(api.call(Method::GET, &path, None).await)
        }
    })
    .await
}

async fn mixed(api: &Api, c: usize, secs: Duration) -> Stats {
    #[derive(Default)]
    struct Pools {
        capturable: VecDeque<String>,
        refundable: VecDeque<String>,
        recent: VecDeque<String>,
    }
    let pools: Rc<RefCell<Pools>> = Rc::default();
    let auto = payment_body(true, false);
    let manual = payment_body(true, true);
    let api = api.clone();
    drive(c, secs, None, move |k| {
        let (api, pools, auto, manual) = (api.clone(), pools.clone(), auto.clone(), manual.clone());
        async move {
            // 40 % create+confirm automatic, 20 % create+confirm manual, 20 % capture,
            // 10 % refund, 10 % read; an operation whose pool is empty creates instead.
            let kind = k % 10;
            let picked = {
                let mut p = pools.borrow_mut();
                match kind {
                    6 | 7 => p.capturable.pop_front().map(|id| (1, id)),
                    8 => p.refundable.pop_front().map(|id| (2, id)),
                    9 => p.recent.back().cloned().map(|id| (3, id)),
                    _ => None,
                }
            };
            let r: Result<(), String> = match picked {
                Some((1, id)) => {
                    let path = format!("/payments/{id}/capture");
                    let r = api
                        .call(Method::POST, &path, Some(web::Bytes::from_static(b"{}")))
                        .await;
                    if r.is_ok() {
                        pools.borrow_mut().refundable.push_back(id);
                    }
                    r.map(|_| ())
                }
                Some((2, id)) => {
                    let body = format!(r#"{{"payment_id":"{id}"}}"#);
                    api.call(Method::POST, "/refunds", Some(body.into()))
                        .await
                        .map(|_| ())
                }
                Some((_, id)) => api
                    .call(Method::GET, &format!("/payments/{id}"), None)
                    .await
                    .map(|_| ()),
                None if kind == 4 || kind == 5 || kind == 6 || kind == 7 => {
                    match api.create_expect(manual, "requires_capture").await {
                        Ok(id) => {
                            pools.borrow_mut().capturable.push_back(id);
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                }
                None => match api.create_expect(auto, "succeeded").await {
                    Ok(id) => {
                        let mut p = pools.borrow_mut();
                        p.refundable.push_back(id.clone());
                        p.recent.push_back(id);
                        if p.recent.len() > 1000 {
                            p.recent.pop_front();
                        }
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
            };
            outcome(r)
        }
    })
    .await
}

async fn webhooks(
    api: &Api,
    c: usize,
    events: usize,
    receiver: &str,
    received: &web::Data<Received>,
) -> anyhow::Result<WebhookRun> {
    let url = format!("{receiver}/hooks");
    let path = format!("/account/shops/{}/webhook", api.profile);
    api.call(
        Method::PUT,
        &path,
        Some(serde_json::to_vec(&json!({ "url": url }))?.into()),
    )
    .await
    .map_err(|e| anyhow!(e))?;
    // The receiver holds its answers while the payments are created, so their events queue
    // up in payd (in the database, past the few requests in flight); then it opens and the
    // time to drain the queue is measured, apart from the time it took to create them.
    received.held.store(true, Ordering::SeqCst);
    let n = events as u64;
    let start = Instant::now();
    let (api2, body) = (api.clone(), payment_body(true, false));
    let created = drive(c, WEBHOOK_LIMIT, None, move |k| {
        let (api, body) = (api2.clone(), body.clone());
        async move {
            if k >= n {
                return Outcome::Exhausted;
            }
            outcome(api.create_expect(body, "succeeded").await)
        }
    })
    .await;
    let create_secs = start.elapsed().as_secs_f64();
    eprintln!(
        "payd-bench:   created {} ({} errors) in {create_secs:.1} s; opening the receiver",
        created.ok, created.errors
    );
    let count = || {
        received
            .hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ids
            .len()
    };
    let opened = Instant::now();
    received.release();
    let deadline = opened + WEBHOOK_LIMIT;
    while count() < created.ok as usize && Instant::now() < deadline {
        actix_web::rt::time::sleep(Duration::from_millis(5)).await;
    }
    // Pause deliveries so later phases do not carry webhook traffic.
    let _ = api
        .call(
            Method::PUT,
            &path,
            Some(serde_json::to_vec(&json!({ "url": url, "enabled": false }))?.into()),
        )
        .await;
    let h = received.hooks.lock().unwrap_or_else(|e| e.into_inner());
    let last = h.last.unwrap_or_else(Instant::now);
    let run = WebhookRun {
        events: created.ok as usize,
        received: h.ids.len(),
        requests: h.requests,
        create_secs,
        drain_secs: last.saturating_duration_since(opened).as_secs_f64(),
    };
    eprintln!(
        "payd-bench:   {} events received in {:.1} s ({:.0}/s)",
        run.received,
        run.drain_secs,
        run.rate()
    );
    Ok(run)
}

#[allow(clippy::too_many_arguments)]
async fn memory(
    args: &Args,
    bin: &Path,
    db: &TestDb,
    data_dir: &Path,
    client: &awc::Client,
    owner: &Api,
    ids: Rc<Vec<String>>,
    created: &Stats,
    reads: &Stats,
) -> anyhow::Result<MemoryRun> {
    // Every actor must still be live when the last one is touched: the idle timeout is the
    // time the touches should take at the measured read rate, with a margin.
    let estimate = ids.len() as f64 / reads.rate().max(1.0);
    let idle = ((estimate * 1.5 + 10.0).ceil() as u64).clamp(5, 900);
    let idle_s = idle.to_string();
    let mut payd = Payd::start(
        args,
        bin,
        &db.url,
        data_dir,
        &[("PAYD_ACTORS__IDLE_TIMEOUT_SECS", idle_s.as_str())],
    )?;
    let base = payd.base();
    let api = Api {
        base: base.clone().into(),
        ..owner.clone()
    };
    let c = args.concurrency;

    // Warm the request path (plain reads, no actor) so its allocations are in the baseline.
    read_all(&api, &ids, WARM_READS, false, c, Duration::from_secs(60)).await;
    actix_web::rt::time::sleep(Duration::from_secs(1)).await;
    let rss_fresh = payd.rss()?;

    // Touch every payment once through its actor: GET ?force_sync=true sends `Sync` to the
    // payment's actor, which loads it; an unconfirmed payment has no processor to ask, so
    // nothing is written.
    eprintln!(
        "payd-bench: memory: touching {} payments through their actors (idle timeout {idle} s)",
        ids.len()
    );
    let touch_limit = Duration::from_secs(idle.saturating_sub(2).max(1));
    let touch = read_all(&api, &ids, ids.len(), true, c, touch_limit).await;
    eprintln!("payd-bench:   {}", touch.summary());
    actix_web::rt::time::sleep(Duration::from_millis(500)).await;
    let rss_live = payd.rss()?;
    let live = live_actors(client, &base).await.unwrap_or(0);
    eprintln!(
        "payd-bench:   {live} live actors, RSS {} MiB (was {} MiB)",
        rss_live >> 20,
        rss_fresh >> 20
    );

    // Passivation: the sweeper runs every idle/2 s and stops actors idle longer than `idle`.
    let started = Instant::now();
    let deadline = started + Duration::from_secs(idle * 2 + 10);
    let mut live_after = live;
    while Instant::now() < deadline {
        actix_web::rt::time::sleep(Duration::from_millis(500)).await;
        live_after = live_actors(client, &base).await.unwrap_or(live_after);
        if live_after == 0 {
            break;
        }
    }
    let passivate_secs = started.elapsed().as_secs_f64();
    actix_web::rt::time::sleep(Duration::from_secs(2)).await;
    let rss_passivated = payd.rss()?;
    eprintln!(
        "payd-bench:   after passivation: {live_after} live, RSS {} MiB",
        rss_passivated >> 20
    );
    if live_after != 0 {
        let tail = payd.tail.lock().unwrap_or_else(|e| e.into_inner());
        eprintln!("payd-bench:   payd's last log lines: {tail:?}");
    }
    let retouched = if args.retouch {
        let again = read_all(&api, &ids, ids.len(), true, c, touch_limit).await;
        actix_web::rt::time::sleep(Duration::from_millis(500)).await;
        let rss = payd.rss()?;
        let live = live_actors(client, &base).await.unwrap_or(0);
        eprintln!(
            "payd-bench:   touched again: {}; {live} live, RSS {} MiB",
            again.summary(),
            rss >> 20
        );
        Some((live, rss))
    } else {
        None
    };
    payd.stop();
    Ok(MemoryRun {
        payments: ids.len(),
        create_secs: created.elapsed.as_secs_f64(),
        touch,
        idle_timeout_secs: idle,
        rss_fresh,
        rss_live,
        live,
        rss_passivated,
        live_after,
        passivate_secs,
        retouched,
    })
}

// ---------------------------------------------------------------------------------------------
// The report

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or("?".into(), |kb| {
            format!("{:.1} GiB", kb as f64 / (1024.0 * 1024.0))
        });
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        })
        .unwrap_or_else(|| "?".into());
    format!("{cores} cores (nproc), {mem} RAM, {cpu}")
}

fn rustc_version() -> String {
    Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "rustc not found".into())
}

/// Jiffies (USER_HZ) the whole machine spent busy, from the `cpu` line of /proc/stat.
fn machine_busy() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...: everything but idle and iowait.
    Some(f.iter().sum::<u64>() - f.get(3)? - f.get(4)?)
}

/// Jiffies this process and its waited-for children (the payd servers) spent on a CPU.
fn own_busy() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis; utime is field 14 of the whole line.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .filter_map(|v| v.parse().ok())
        .collect();
    Some(f.iter().sum())
}

/// What else ran on the machine during a run.
#[derive(Default)]
struct Noise {
    start: Option<(Instant, u64, u64)>,
    /// (cores' worth of CPU used by other processes, on average; load average at the end).
    result: Option<(f64, String)>,
}

impl Noise {
    fn begin() -> Noise {
        Noise {
            start: machine_busy()
                .zip(own_busy())
                .map(|(m, o)| (Instant::now(), m, o)),
            result: None,
        }
    }

    fn end(&mut self) {
        let Some((at, m0, o0)) = self.start else {
            return;
        };
        let (Some(m1), Some(o1)) = (machine_busy(), own_busy()) else {
            return;
        };
        let secs = at.elapsed().as_secs_f64().max(1e-9);
        let other = (m1.saturating_sub(m0) as f64 - o1.saturating_sub(o0) as f64).max(0.0);
        let load = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| l.split_whitespace().next().map(str::to_owned))
            .unwrap_or_default();
        self.result = Some((other / 100.0 / secs, load));
    }
}

/// The commit of the work tree the bench runs in, if it is a git checkout.
fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Some(if dirty {
        format!("{commit}, with uncommitted changes")
    } else {
        commit
    })
}

fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("cargo run --release --bin payd-bench -- {}", args.join(" "))
}

fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

fn verdict(met: bool) -> &'static str {
    if met {
        "**met**"
    } else {
        "**not met**"
    }
}

fn lat(s: &Stats) -> String {
    format!("{:.1} / {:.1} ms", s.pct_ms(50.0), s.pct_ms(99.0))
}

fn errs(s: &Stats) -> String {
    if s.errors == 0 {
        String::new()
    } else {
        format!(" ({} errors)", s.errors)
    }
}

fn render(args: &Args, r: &Report) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!("## {}", args.db.title()));
    line(String::new());
    line(format!(
        "Measured {} on {}; payd {}{}, {}; {} requests in flight, {} s per phase.",
        SystemClock.now().format("%Y-%m-%d %H:%M UTC"),
        machine(),
        r.payd_version.as_deref().unwrap_or("?"),
        git_commit().map_or(String::new(), |c| format!(" (git {c})")),
        rustc_version(),
        args.concurrency,
        args.seconds
    ));
    line(String::new());
    line(format!("Command: `{}`", command_line()));
    if let Some((other, load)) = &r.noise.result {
        line(String::new());
        line(format!(
            "Other processes on the machine used {other:.2} cores on average during the run (1-minute load average at its end: {load}); the load generator, the in-process servers and payd share the same cores."
        ));
    }
    line(String::new());
    line("| measure | payd | baseline | ratio | target | status |".into());
    line("| --- | ---: | ---: | ---: | --- | --- |".into());
    let raw = r.raw_inserts.as_ref().map(Stats::rate);
    if let Some(s) = &r.confirm {
        let (base, ratio, status) = match raw {
            Some(b) => (
                format!("{b:.0} raw INSERTs/s"),
                pct(s.rate() / b),
                verdict(s.rate() / b >= 0.5).to_owned(),
            ),
            None => ("—".into(), "—".into(), "—".into()),
        };
        line(format!(
            "| create+confirm, automatic capture (payments/s) | {:.0}{} | {base} | {ratio} | ≥ 50 % | {status} |",
            s.rate(),
            errs(s)
        ));
        line(format!(
            "| create+confirm latency p50 / p99 (closed loop) | {} | | | | |",
            lat(s)
        ));
        if let Some(e) = &r.empty_route {
            line(format!(
                "| create+confirm vs an empty actix-web route (requests/s) | {:.0} | {:.0} empty-route requests/s | {} | | |",
                s.rate(),
                e.rate(),
                pct(s.rate() / e.rate())
            ));
        }
    }
    if let Some((rate, s)) = &r.paced {
        line(format!(
            "| p99 at half of the max rate (create+confirm paced at {rate:.0}/s; p50 {:.1} ms) | {:.1} ms{} | | | ≤ 20 ms | {} |",
            s.pct_ms(50.0),
            s.pct_ms(99.0),
            errs(s),
            verdict(s.pct_ms(99.0) <= 20.0)
        ));
    }
    if let Some(s) = &r.manual {
        line(format!(
            "| manual capture: create+confirm then capture (flows/s; p50 / p99 per flow {}) | {:.0}{} | | | | |",
            lat(s),
            s.rate(),
            errs(s)
        ));
    }
    if let Some(s) = &r.refund {
        line(format!(
            "| refunds of captured payments (refunds/s; p50 / p99 {}) | {:.0}{} | | | | |",
            lat(s),
            s.rate(),
            errs(s)
        ));
    }
    if let Some(s) = &r.mixed {
        line(format!(
            "| mixed: 40 % create+confirm, 20 % create manual, 20 % capture, 10 % refund, 10 % read (requests/s; p50 / p99 {}) | {:.0}{} | | | | |",
            lat(s),
            s.rate(),
            errs(s)
        ));
    }
    if let Some(w) = &r.webhooks {
        let (base, ratio, status) = match &r.awc_full {
            Some(a) => (
                format!("{:.0} raw awc POSTs/s", a.rate()),
                pct(w.rate() / a.rate()),
                verdict(w.rate() / a.rate() >= 0.5 && w.received >= w.events).to_owned(),
            ),
            None => ("—".into(), "—".into(), "—".into()),
        };
        line(format!(
            "| webhook deliveries (events/s, a queue of events drained) | {:.0} | {base} | {ratio} | ≥ 50 % | {status} |",
            w.rate()
        ));
        if let Some(a4) = &r.awc_4 {
            line(format!(
                "| webhook deliveries vs raw awc with 4 in flight (payd's per-endpoint cap) | {:.0} | {:.0} raw awc POSTs/s | {} | | |",
                w.rate(),
                a4.rate(),
                pct(w.rate() / a4.rate())
            ));
        }
    }
    if let Some(m) = &r.memory {
        line(format!(
            "| RSS per live idle payment actor ({} live) | {:.2} KiB | | | ≤ 2 KiB | {} |",
            m.live,
            m.per_actor() / 1024.0,
            verdict(m.per_actor() <= 2048.0 && m.live as usize >= m.payments * 9 / 10)
        ));
        line(format!(
            "| memory returned after passivation ({} live left) | {} ({} MiB of {} MiB) | | | returned (≥ 50 %) | {} |",
            m.live_after,
            pct(m.returned()),
            m.rss_live.saturating_sub(m.rss_passivated) >> 20,
            m.rss_live.saturating_sub(m.rss_fresh) >> 20,
            verdict(m.returned() >= 0.5 && m.live_after == 0)
        ));
    }
    line(String::new());
    line("Baselines and details:".into());
    line(String::new());
    if let Some(s) = &r.raw_inserts {
        line(format!(
            "- raw single-row INSERT, one per transaction, through `payd::db::connect` (payd's pool and pragmas): {:.0}/s; {}",
            s.rate(),
            s.summary()
        ));
    }
    if let Some(s) = &r.empty_route {
        line(format!(
            "- empty actix-web route (in-process, {} workers, POST with the create+confirm body, 200 without body): {:.0}/s; {}",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            s.rate(),
            s.summary()
        ));
    }
    if let Some(s) = &r.awc_full {
        line(format!(
            "- raw awc POSTs of a 1.5 KB event-sized body to an in-process receiver answering 204, {} in flight: {:.0}/s; {}",
            args.concurrency,
            s.rate(),
            s.summary()
        ));
    }
    if let Some(s) = &r.awc_4 {
        line(format!(
            "- the same with 4 in flight (the receiver counted {} POSTs in both runs): {:.0}/s; {}",
            r.raw_counted,
            s.rate(),
            s.summary()
        ));
    }
    for (name, s) in [
        ("create+confirm", r.confirm.as_ref()),
        ("manual capture flow", r.manual.as_ref()),
        ("refund", r.refund.as_ref()),
        ("mixed", r.mixed.as_ref()),
    ] {
        if let Some(s) = s {
            line(format!("- {name}: {}", s.summary()));
        }
    }
    if let Some((_, s)) = &r.paced {
        line(format!(
            "- paced create+confirm (latency from the planned start): {}",
            s.summary()
        ));
    }
    if let Some(w) = &r.webhooks {
        line(format!(
            "- webhooks: {} payments created (create+confirm, one `payment_succeeded` each) in {:.1} s while the receiver held its answers (payd with `PAYD_WEBHOOKS__REQUEST_TIMEOUT_SECS=60`, `PAYD_WEBHOOKS__LEASE_SECS=180` so the held requests are not retried meanwhile); once it answered, {} distinct events received ({} requests) in {:.2} s ({:.0}/s)",
            w.events,
            w.create_secs,
            w.received,
            w.requests,
            w.drain_secs,
            w.rate()
        ));
    }
    if let Some(m) = &r.memory {
        line(format!(
            "- memory: {} payments created without confirm in {:.1} s; a fresh server (PAYD_ACTORS__IDLE_TIMEOUT_SECS={}, long enough for every actor to be live at once) after {WARM_READS} warm-up reads had RSS {:.1} MiB; each payment touched once by `GET /payments/{{id}}?force_sync=true` (goes through the actor; an unconfirmed payment has no processor to ask, so nothing is written): {}; then RSS {:.1} MiB with {} live actors (`payd_actors_live`); {:.1} s later {} live, RSS {:.1} MiB",
            m.payments,
            m.create_secs,
            m.idle_timeout_secs,
            m.rss_fresh as f64 / 1048576.0,
            m.touch.summary(),
            m.rss_live as f64 / 1048576.0,
            m.live,
            m.passivate_secs,
            m.live_after,
            m.rss_passivated as f64 / 1048576.0
        ));
        if let Some((live, rss)) = m.retouched {
            line(format!(
                "- `--retouch`: every payment touched again after passivation: {live} live actors, RSS {:.1} MiB",
                rss as f64 / 1048576.0
            ));
        }
    }
    out
}

/// Replaces (or adds) this database's section between its markers.
fn write_section(path: &Path, db: DbKind, section: &str) -> anyhow::Result<()> {
    let begin = format!("{BEGIN}{}:begin -->", db.key());
    let end = format!("{BEGIN}{}:end -->", db.key());
    let doc = std::fs::read_to_string(path).unwrap_or_else(|_| {
        format!(
            "# Performance\n\nWritten by `payd-bench` (`src/bin/payd-bench.rs`); each run replaces its database's section.\n\n{BEGIN}sqlite:begin -->\n{BEGIN}sqlite:end -->\n\n{BEGIN}postgres:begin -->\n{BEGIN}postgres:end -->\n"
        )
    });
    let block = format!("{begin}\n{section}{end}");
    let doc = match (doc.find(&begin), doc.find(&end)) {
        (Some(b), Some(e)) if e > b => format!("{}{block}{}", &doc[..b], &doc[e + end.len()..]),
        _ => format!("{}\n{block}\n", doc.trim_end()),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, doc)?;
    Ok(())
}
