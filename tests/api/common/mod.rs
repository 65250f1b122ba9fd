//! The test harness: a real payd on 127.0.0.1:0 with a private database (a SQLite file in a
//! temporary directory, or a fresh PostgreSQL database when `TEST_DATABASE_URL` is set), a
//! clock the test moves, and a small HTTP client.
#![allow(dead_code)]

pub mod browser;
pub mod child;
pub mod examples;
pub mod formation;
pub mod keyed_load;
pub mod receiver;
pub mod sim;
pub mod strict_app;
pub mod strict_stripe;
pub mod stripe;
pub mod stripe_api;

use std::{sync::Arc, time::Duration};

use actix_web::{dev::ServerHandle, http::Method, web};
use payd::{clock::ManualClock, webhooks::dispatcher::Dispatcher, AppState, Application, Settings};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};
use serde_json::Value;

pub const ADMIN_KEY: &str = "test-admin-key";

/// A private database for one test.
pub struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub async fn new() -> Self {
        match std::env::var("TEST_DATABASE_URL")
            .ok()
            .filter(|u| !u.is_empty())
        {
            Some(base) => Self::postgres(&base).await,
            None => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}/payd.db?mode=rwc", dir.path().display());
                Self {
                    url,
                    _dir: Some(dir),
                }
            }
        }
    }

    /// A database the test did not make (a failover pair's URL).
    pub fn at(url: String) -> Self {
        Self { url, _dir: None }
    }

    pub fn is_postgres(&self) -> bool {
        self.url.starts_with("postgres")
    }

    async fn postgres(base: &str) -> Self {
        let name = format!("payd_test_{}", uuid::Uuid::now_v7().simple());
        let admin = Database::connect(base)
            .await
            .expect("TEST_DATABASE_URL reachable");
        admin
            .execute_raw(Statement::from_string(
                DbBackend::Postgres,
                format!("CREATE DATABASE {name}"),
            ))
            .await
            .expect("create test database");
        admin.close().await.ok();
        let (head, query) = match base.split_once('?') {
            Some((h, q)) => (h, format!("?{q}")),
            None => (base, String::new()),
        };
        let server = head.rsplit_once('/').map_or(head, |(server, _)| server);
        Self {
            url: format!("{server}/{name}{query}"),
            _dir: None,
        }
    }
}

/// The settings production requires (mode, public URL, pepper, master key) and nothing else:
/// `spawn_with(db, PRODUCTION)` is a production instance with every guard at its default.
pub const PRODUCTION: &[(&str, &str)] = &[
    ("PAYD_MODE", "production"),
    ("PAYD_HTTP__PUBLIC_URL", "https://pay.example.com"),
    ("PAYD_SECURITY__KEY_PEPPER", "a-production-pepper-for-tests"),
    (
        "PAYD_SECURITY__MASTER_KEY",
        "cGF5ZC1wcm9kdWN0aW9uLXRlc3QtbWFzdGVyLWtleSE=",
    ),
];

/// Settings for a test server on this database; `extra` are more `PAYD_*` variables.
pub fn settings(db: &TestDb, extra: &[(&str, &str)]) -> Settings {
    let mut vars: Vec<(String, String)> = [
        ("PAYD_LISTEN", "127.0.0.1:0"),
        ("PAYD_DATABASE_URL", db.url.as_str()),
        ("PAYD_ADMIN_KEY", ADMIN_KEY),
        ("PAYD_SANDBOX__DEMO_MERCHANT", "false"),
        ("PAYD_HTTP__WORKERS", "1"),
        ("PAYD_ACTORS__ARBITERS", "1"),
        ("PAYD_SCHEDULER__POLL_INTERVAL_MS", "50"),
        ("PAYD_WEBHOOKS__POLL_INTERVAL_MS", "50"),
        // A route that changes a cached key or routing waits this long (tests/api/lookups.rs).
        ("PAYD_DATABASE__LOOKUP_STALENESS_MS", "250"),
        // Load tests send hundreds of requests with one key; the limit has its own test.
        ("PAYD_LIMITS__REQUESTS_PER_SECOND", "0"),
    ]
    .iter()
    .chain(extra.iter())
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    if db.is_postgres() {
        vars.push(("PAYD_DATABASE__MAX_CONNECTIONS".into(), "5".into()));
    }
    Settings::load_from(vars).expect("test settings")
}

pub fn init_logs() {
    if std::env::var("TEST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_test_writer()
            .try_init();
    }
}

/// A running server.
pub struct TestApp {
    /// The first instance's address.
    pub base: String,
    /// Every instance's address: requests go round-robin over them.
    bases: Vec<String>,
    next: std::sync::atomic::AtomicUsize,
    pub clock: Arc<ManualClock>,
    pub state: web::Data<AppState>,
    pub dispatcher: web::Data<Dispatcher>,
    /// Every instance's dispatcher.
    dispatchers: Vec<web::Data<Dispatcher>>,
    /// Every instance's scheduler.
    schedulers: Vec<Arc<payd::scheduler::Scheduler>>,
    pub db: Arc<TestDb>,
    handles: Vec<ServerHandle>,
}

impl TestApp {
    /// How many instances serve this test (`TEST_INSTANCES`).
    pub fn instances(&self) -> usize {
        self.bases.len()
    }

    /// Every instance's address.
    pub fn bases(&self) -> &[String] {
        &self.bases
    }

    /// Sends what is due by the test's clock, on every instance, and waits until it is sent
    /// and recorded: after it, what was not sent is not due (a test asserts absence with this,
    /// never after a fixed sleep).
    pub async fn settle_deliveries(&self) {
        // Until a round over every instance claims nothing (bounded: each round sends what was
        // due, and nothing comes due while the clock stands).
        for _ in 0..10 {
            let mut claimed = 0;
            for d in &self.dispatchers {
                claimed += d.settle().await.expect("settle the deliveries");
            }
            if claimed == 0 {
                return;
            }
        }
        panic!("deliveries kept coming due with the clock standing");
    }

    /// Runs the scheduled jobs due by the test's clock, on every instance, until none is left:
    /// after it, what a due job would have done is done, whichever instance's tick ran it (a
    /// test asserts that a job has not acted yet with this, never after a fixed sleep).
    pub async fn run_due_jobs(&self) {
        use payd::clock::Clock;
        use payd_entity::scheduled_job;
        use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
        // Bounded: each round runs what was due, and jobs come due again only as the clock
        // moves (a periodic job reschedules itself after the clock's now). A job an
        // instance's own loop claimed is still due until it ran: wait for it.
        for _ in 0..500 {
            let mut ran = 0;
            for s in &self.schedulers {
                ran += s.tick().await.expect("run the due jobs");
            }
            let due = scheduled_job::Entity::find()
                .filter(scheduled_job::Column::DueAt.lte(self.clock.base()))
                .count(&self.state.db)
                .await
                .expect("count the due jobs");
            match (ran, due) {
                (0, 0) => return,
                (0, _) => actix_web::rt::time::sleep(Duration::from_millis(10)).await,
                _ => {}
            }
        }
        panic!("jobs kept coming due with the clock standing");
    }

    /// The path of `url` when it is on one of this test's instances (each builds its links,
    /// such as a checkout URL, from its own address).
    pub fn path_of<'u>(&self, url: &'u str) -> Option<&'u str> {
        self.bases
            .iter()
            .find_map(|b| url.strip_prefix(b.as_str()))
            .filter(|p| p.starts_with('/'))
    }
}

/// True when tests run against several instances (lost races then answer 409
/// `concurrent_update` where one instance would have serialized everything).
pub fn several_instances(db: &TestDb) -> bool {
    instances(db) > 1
}

/// With `TEST_INSTANCES=2` and PostgreSQL, every test app is two instances on one database,
/// and requests alternate between them.
fn instances(db: &TestDb) -> usize {
    let asked = std::env::var("TEST_INSTANCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    if db.is_postgres() {
        asked.clamp(1, 4)
    } else {
        1
    }
}

/// A merchant created through the admin route.
#[derive(Debug, Clone)]
pub struct Merchant {
    pub merchant_id: String,
    pub profile_id: String,
    pub secret_key: String,
    pub publishable_key: String,
}

/// An HTTP answer, its body parsed as JSON when it is JSON.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: awc::http::header::HeaderMap,
    pub raw: web::Bytes,
    pub body: Value,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The error code of an error answer.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    pub fn param(&self) -> Option<&str> {
        self.body["error"]["param"].as_str()
    }
}

/// A production instance (`PRODUCTION` and `extra`) and a merchant's live and sandbox secret
/// and publishable keys, for one shop: `(app, live, test)`.
pub async fn production_merchant(extra: &[(&str, &str)]) -> (TestApp, Merchant, Merchant) {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_with(db, &[PRODUCTION, extra].concat()).await;
    let body = serde_json::json!({"name": "Acme", "mode": "production"});
    let r = app.post("/admin/merchants", ADMIN_KEY, body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let s = |f: &str| r.body[f].as_str().unwrap().to_owned();
    let live = Merchant {
        merchant_id: s("merchant_id"),
        profile_id: s("profile_id"),
        secret_key: s("secret_key"),
        publishable_key: s("publishable_key"),
    };
    let mut test = live.clone();
    for (kind, key) in [
        ("secret", &mut test.secret_key),
        ("publishable", &mut test.publishable_key),
    ] {
        let body = serde_json::json!({"kind": kind, "test_mode": true});
        let r = app.post("/account/api-keys", &live.secret_key, body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        *key = r.body["key"].as_str().unwrap().to_owned();
    }
    (app, live, test)
}

pub async fn spawn_app() -> TestApp {
    spawn_with(Arc::new(TestDb::new().await), &[]).await
}

/// Starts a server on an existing database (restart tests reuse one).
pub async fn spawn_with(db: Arc<TestDb>, extra: &[(&str, &str)]) -> TestApp {
    init_logs();
    let clock = ManualClock::new();
    spawn_with_clock(db, extra, clock).await
}

pub async fn spawn_with_clock(
    db: Arc<TestDb>,
    extra: &[(&str, &str)],
    clock: Arc<ManualClock>,
) -> TestApp {
    let count = instances(&db);
    start(db, extra, clock, count).await
}

/// One instance whatever `TEST_INSTANCES` asks: for what is per instance by design (the rate
/// limits' buckets live in an instance's memory).
pub async fn spawn_one(db: Arc<TestDb>, extra: &[(&str, &str)]) -> TestApp {
    spawn_instances(db, extra, 1).await
}

/// `count` instances whatever `TEST_INSTANCES` asks.
pub async fn spawn_instances(db: Arc<TestDb>, extra: &[(&str, &str)], count: usize) -> TestApp {
    init_logs();
    start(db, extra, ManualClock::new(), count).await
}

async fn start(
    db: Arc<TestDb>,
    extra: &[(&str, &str)],
    clock: Arc<ManualClock>,
    count: usize,
) -> TestApp {
    let mut bases = Vec::new();
    let mut handles = Vec::new();
    let mut first = None;
    let mut dispatchers = Vec::new();
    let mut schedulers = Vec::new();
    for _ in 0..count {
        let app = Application::build(settings(&db, extra), clock.clone())
            .await
            .expect("build app");
        bases.push(format!("http://127.0.0.1:{}", app.port()));
        first.get_or_insert_with(|| (app.state(), app.dispatcher()));
        dispatchers.push(app.dispatcher());
        schedulers.push(app.state().scheduler.clone());
        handles.push(app.handle());
        actix_web::rt::spawn(app.run_until_stopped());
    }
    let (state, dispatcher) = first.expect("one instance at least");
    let app = TestApp {
        base: bases[0].clone(),
        bases,
        next: Default::default(),
        clock,
        state,
        dispatcher,
        dispatchers,
        schedulers,
        db,
        handles,
    };
    if receiver::CONTRACT.get().is_none() {
        let doc = app
            .send(Method::GET, "/openapi.json", None, None, &[])
            .await;
        let _ = receiver::CONTRACT.set(receiver::Contract::of(&doc.body));
        let _ = examples::ROUTES.set(examples::Routes::of(&doc.body));
    }
    app
}

/// A `multipart/form-data` body of these parts: (name, filename, bytes).
pub fn form(parts: &[(&str, Option<&str>, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "payd-test-boundary-7d1f";
    let mut body = Vec::new();
    for (name, filename, bytes) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        let disposition = match filename {
            Some(f) => format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\nContent-Type: application/octet-stream\r\n\r\n"),
            None => format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n"),
        };
        body.extend_from_slice(disposition.as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// `payment_method_data` with a test card.
pub fn card(number: &str) -> Value {
    serde_json::json!({"card": {"number": number, "exp_month": 12, "exp_year": 2035, "cvc": "123"}})
}

pub fn client() -> awc::Client {
    awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .disable_redirects()
        .finish()
}

impl TestApp {
    /// Sends a request; `key` goes in the `api-key` header, `body` as JSON.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let body = body.map(|b| ("application/json", serde_json::to_vec(b).expect("JSON")));
        self.send_bytes(method, path, key, body, headers).await
    }

    /// Sends a request whose body is these bytes of this content type.
    pub async fn send_bytes(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<(&str, Vec<u8>)>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.send_to(n, method, path, key, body, headers).await
    }

    /// Sends a request to instance `n` (modulo the instances there are), not the next one.
    pub async fn send_to(
        &self,
        n: usize,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<(&str, Vec<u8>)>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let base = &self.bases[n % self.bases.len()];
        let verb = method.as_str().to_owned();
        let sent = body
            .as_ref()
            .filter(|(content_type, _)| *content_type == "application/json")
            .map(|(_, bytes)| bytes.clone());
        let mut req = client().request(method, format!("{base}{path}"));
        if let Some(key) = key {
            req = req.insert_header(("api-key", key));
        }
        for (name, value) in headers {
            req = req.insert_header((*name, *value));
        }
        let mut res = match body {
            Some((content_type, bytes)) => {
                req.insert_header(("content-type", content_type))
                    .send_body(bytes)
                    .await
            }
            None => req.send().await,
        }
        .expect("request sent");
        let raw = res.body().limit(16 * 1024 * 1024).await.expect("body read");
        let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
        let status = res.status().as_u16();
        examples::answer(&verb, path, sent.as_deref(), status, &raw);
        Answer {
            status,
            headers: res.headers().clone(),
            raw,
            body,
        }
    }

    pub async fn get(&self, path: &str, key: &str) -> Answer {
        self.send(Method::GET, path, Some(key), None, &[]).await
    }

    pub async fn post(&self, path: &str, key: &str, body: Value) -> Answer {
        self.send(Method::POST, path, Some(key), Some(&body), &[])
            .await
    }

    pub async fn delete(&self, path: &str, key: &str) -> Answer {
        self.send(Method::DELETE, path, Some(key), None, &[]).await
    }

    /// The types of the events announced for an object, oldest first.
    pub async fn event_types(&self, m: &Merchant, object_id: &str) -> Vec<String> {
        let events = self
            .post(
                &format!("/events/{}", m.merchant_id),
                &m.secret_key,
                serde_json::json!({"object_id": object_id}),
            )
            .await;
        let mut types: Vec<String> = events.body["data"]
            .as_array()
            .expect("a list of events")
            .iter()
            .map(|e| e["event_type"].as_str().unwrap_or_default().to_owned())
            .collect();
        types.reverse();
        types
    }

    /// Approves a processor account as the operator; the account as the operator sees it.
    pub async fn approve_processor(&self, id: &str) -> Value {
        let path = format!("/admin/processors/{id}/approve");
        let r = self.post(&path, ADMIN_KEY, serde_json::json!({})).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    pub async fn create_merchant(&self, name: &str) -> Merchant {
        let res = self
            .post(
                "/admin/merchants",
                ADMIN_KEY,
                // Sandbox keys on any deployment (a production one's default is live).
                serde_json::json!({ "name": name, "mode": "sandbox" }),
            )
            .await;
        assert_eq!(res.status, 201, "{:?}", res.body);
        let s = |f: &str| res.body[f].as_str().expect(f).to_owned();
        Merchant {
            merchant_id: s("merchant_id"),
            profile_id: s("profile_id"),
            secret_key: s("secret_key"),
            publishable_key: s("publishable_key"),
        }
    }

    /// Points the merchant's shop's webhook at `url`; returns the signing secret the answer
    /// showed (a new one when the endpoint is created, empty when it is updated).
    pub async fn set_webhook(&self, m: &Merchant, url: &str) -> String {
        let r = self
            .call(
                m,
                Method::PUT,
                &format!("/account/shops/{}/webhook", m.profile_id),
                Some(serde_json::json!({ "url": url })),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["secret"].as_str().unwrap_or_default().to_owned()
    }

    /// A request as the merchant's server sends it: secret key and its default shop.
    pub async fn call(
        &self,
        m: &Merchant,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        self.send(
            method,
            path,
            Some(&m.secret_key),
            body.as_ref(),
            &[("x-profile-id", &m.profile_id)],
        )
        .await
    }

    /// `POST /files`: an evidence file of these bytes, named `name`.
    pub async fn upload(&self, m: &Merchant, name: &str, bytes: &[u8]) -> Answer {
        let parts: [(&str, Option<&str>, &[u8]); 2] = [
            ("purpose", None, b"dispute_evidence"),
            ("file", Some(name), bytes),
        ];
        let (content_type, body) = form(&parts);
        self.send_bytes(
            Method::POST,
            "/files",
            Some(&m.secret_key),
            Some((&content_type, body)),
            &[],
        )
        .await
    }

    /// A 5.00 USD payment confirmed with the test card …4242 (it succeeds); its id.
    pub async fn succeeded_payment(&self, m: &Merchant) -> String {
        let body = serde_json::json!({"amount": 500, "currency": "USD", "confirm": true,
            "payment_method_data": card("4242424242424242")});
        let r = self.create_payment(m, body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        r.body["payment_id"].as_str().unwrap().to_owned()
    }

    pub async fn create_payment(&self, m: &Merchant, body: Value) -> Answer {
        self.call(m, Method::POST, "/payments", Some(body)).await
    }

    /// `POST /payments` in the merchant's shop `shop` (`x-profile-id`), with its secret key.
    pub async fn create_payment_in(&self, m: &Merchant, shop: &str, body: &Value) -> Answer {
        let headers = [("x-profile-id", shop)];
        self.send(
            Method::POST,
            "/payments",
            Some(&m.secret_key),
            Some(body),
            &headers,
        )
        .await
    }

    /// Polls a payment until `done` holds (bounded: ten seconds).
    pub async fn wait_for_payment(
        &self,
        m: &Merchant,
        id: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let p = self
                .call(m, Method::GET, &format!("/payments/{id}"), None)
                .await;
            if done(&p.body) {
                return p.body;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "payment never settled: {}",
                p.body
            );
            actix_web::rt::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Stops the server gracefully and waits until it has.
    pub async fn stop(self) {
        for handle in &self.handles {
            handle.stop(true).await;
        }
    }
}
