//! A PostgreSQL outage of 10 s under load, as an operator would see it. Between payd and the
//! database sits a TCP proxy the test controls; "down" cuts every connection and refuses new
//! ones, which to payd is a database that went away. During the outage, no answer is 500:
//! every error is 503 `database_unavailable` with `Retry-After` (or, for a retry whose first
//! try still holds its key, 409 `idempotency_key_in_use` with `Retry-After`). Readiness turns
//! 503 within 2 s of the stop and 200 within 2 s of the return. Clients retry with the same
//! `Idempotency-Key` until answered: no key ever made two payments. Every acknowledged payment
//! is there with the status it was acknowledged with, payments succeed within 1 s of the
//! return, and the events of every acknowledged payment are delivered afterwards.
//! (PostgreSQL only: with `TEST_DATABASE_URL` unset the test has nothing to stop and returns
//! at once.)

use crate::common;

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use actix_web::http::Method;
use common::{
    card,
    keyed_load::{self, KeyedLoad},
    receiver::Receiver,
    spawn_with, TestDb,
};
use sea_orm::EntityTrait;
use serde_json::json;
use tokio::{
    net::{TcpListener, TcpStream},
    task::AbortHandle,
};

/// A TCP proxy to `target` that can be taken down and brought back.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Proxy {
    async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let links: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (accept_up, accept_links) = (up.clone(), links.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !accept_up.load(Ordering::SeqCst) {
                    continue; // dropped: the connection is refused
                }
                let target = target.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                accept_links.lock().unwrap().push(link.abort_handle());
            }
        });
        Self { port, up, links }
    }

    /// A proxy to the test database's server, and the database's URL through it.
    async fn before(db: &TestDb) -> (Self, String) {
        let (head, rest) = db.url.split_once('@').unwrap();
        let (host, path) = rest.split_once('/').unwrap();
        let proxy = Proxy::start(host.to_owned()).await;
        let url = format!("{head}@127.0.0.1:{}/{path}", proxy.port);
        (proxy, url)
    }

    fn down(&self) {
        self.up.store(false, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    fn back(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

/// How long after `since` readiness answers `status` (polled every 100 ms, at most 3 s).
async fn readiness_turns(app: &common::TestApp, status: u16, since: Instant) -> Duration {
    loop {
        let r = app
            .send(Method::GET, "/health/ready", None, None, &[])
            .await;
        if r.status == status {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < Duration::from_secs(3),
            "readiness stayed {}",
            r.status
        );
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_web::test]
async fn a_postgres_outage_answers_503_readiness_follows_and_nothing_acknowledged_is_lost() {
    let db = Arc::new(TestDb::new().await);
    if !db.is_postgres() {
        return;
    }
    let (proxy, proxied) = Proxy::before(&db).await;
    let app = spawn_with(
        db.clone(),
        &[
            ("PAYD_DATABASE_URL", proxied.as_str()),
            ("PAYD_DATABASE__ACQUIRE_TIMEOUT_MS", "500"),
            ("PAYD_IDEMPOTENCY__LOCK_SECS", "2"),
        ],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let receiver = Receiver::start().await;
    app.set_webhook(&m, &receiver.url).await;
    let ticker = keyed_load::tick_with_wall_clock(&app);
    // Four clients create and confirm payments for 14 s, each retrying with the same key until
    // it is answered; the database is away from 2 s to 12 s.
    let start = Instant::now();
    let load = KeyedLoad::start(std::slice::from_ref(&app.base), &m, 4, Duration::ZERO);
    let at = |offset: Duration| async move {
        let deadline = start + offset;
        actix_web::rt::time::sleep(deadline.saturating_duration_since(Instant::now())).await;
    };
    at(Duration::from_secs(2)).await;
    proxy.down();
    let stopped = Instant::now();
    let first_503 = readiness_turns(&app, 503, stopped).await;
    assert!(
        first_503 <= Duration::from_secs(2),
        "readiness 503 after {first_503:?}"
    );
    // The proxy accepts and closes, as a TCP front with no server behind it does; with
    // `sslmode=prefer` the driver's own words for that are "unexpected response from
    // SSLRequest" or, when its first bytes arrived before the close, "connection reset by
    // peer". Readiness names the cause.
    let ready = app
        .send(Method::GET, "/health/ready", None, None, &[])
        .await;
    let said = ready.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("no writable PostgreSQL reachable (host 1: the connection was closed before PostgreSQL answered"),
        "{said}"
    );
    at(Duration::from_secs(12)).await;
    proxy.back();
    let returned = Instant::now();
    let first_200 = readiness_turns(&app, 200, returned).await;
    assert!(
        first_200 <= Duration::from_secs(2),
        "readiness 200 after {first_200:?}"
    );
    at(Duration::from_secs(14)).await;
    let tries = load.finish().await;
    ticker.abort();

    keyed_load::assert_only_retryable_errors(&tries);
    let back_ok = tries
        .iter()
        .filter(|t| t.status == 201 && t.at > returned)
        .map(|t| t.at - returned)
        .min()
        .expect("payments succeeded after the return");
    assert!(
        back_ok <= Duration::from_secs(1),
        "first success {back_ok:?} after the return"
    );
    let acked = keyed_load::acknowledged(&tries);
    keyed_load::assert_kept_and_made_once(&app, &m, &acked).await;
    keyed_load::assert_all_announced(&app, &receiver, &acked).await;
}

/// A tmpfs mounted over a directory for the test's life (root only), detached at the end.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    /// `None` where mounting is not allowed (not root): the test cannot run there. CI runs
    /// as root, and there it must.
    fn mount(dir: &std::path::Path, size: &str) -> Option<Self> {
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            mounted || std::env::var_os("CI").is_none(),
            "CI must be able to mount a tmpfs"
        );
        mounted.then(|| Self(dir.to_owned()))
    }

    /// Fills what is left of it; returns the filler file.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 64 * 1024];
        // Bounded: the disk is a few MiB.
        for _ in 0..10_000 {
            if file.write_all(&block).and_then(|()| file.flush()).is_err() {
                break;
            }
        }
        let _ = file.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// SQLite on a disk that fills up: writes answer 503 `database_unavailable` with `Retry-After`
/// (never 500), readiness turns 503 while reads still answer, nothing acknowledged is lost,
/// and writes and readiness come back once there is space again. (SQLite only, and only where
/// the test may mount a tmpfs: as root, which CI is.)
#[actix_web::test]
async fn a_full_sqlite_disk_answers_503_readiness_follows_and_writes_resume() {
    let db = Arc::new(TestDb::new().await);
    if db.is_postgres() {
        return;
    }
    let file = db
        .url
        .trim_start_matches("sqlite://")
        .split('?')
        .next()
        .unwrap();
    let dir = std::path::Path::new(file).parent().unwrap().to_owned();
    let Some(disk) = SmallDisk::mount(&dir, "4m") else {
        eprintln!("skipped: a tmpfs cannot be mounted here");
        return;
    };
    let app = spawn_with(db.clone(), &[]).await;
    let m = app.create_merchant("Acme").await;
    let pay = || {
        app.create_payment(
            &m,
            json!({"amount": 500, "currency": "USD", "confirm": true,
                "payment_method_data": card("4242424242424242")}),
        )
    };
    let mut acknowledged = Vec::new();
    for _ in 0..5 {
        let r = pay().await;
        assert_eq!(r.status, 201, "{}", r.body);
        acknowledged.push((
            r.body["payment_id"].as_str().unwrap().to_owned(),
            r.body["status"].clone(),
        ));
    }

    let filler = disk.fill();
    // Writes fail once what SQLite already holds is used up: every error is a 503.
    let mut refused = 0;
    for _ in 0..200 {
        if refused == 3 {
            break;
        }
        let r = pay().await;
        match r.status {
            201 => acknowledged.push((
                r.body["payment_id"].as_str().unwrap().to_owned(),
                r.body["status"].clone(),
            )),
            _ => {
                assert_eq!(
                    (r.status, r.code()),
                    (503, "database_unavailable"),
                    "{}",
                    r.body
                );
                assert!(r.headers.contains_key("retry-after"), "{:?}", r.headers);
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 3, "a full disk is felt");
    let since = Instant::now();
    assert!(readiness_turns(&app, 503, since).await <= Duration::from_secs(2));
    let live = app.send(Method::GET, "/health/live", None, None, &[]).await;
    assert_eq!(live.status, 200, "the process is fine");
    for (id, status) in &acknowledged {
        let p = app.get(&format!("/payments/{id}"), &m.secret_key).await;
        assert_eq!(
            (p.status, &p.body["status"]),
            (200, status),
            "{id}: reads still answer"
        );
    }

    std::fs::remove_file(filler).unwrap();
    let since = Instant::now();
    assert!(readiness_turns(&app, 200, since).await <= Duration::from_secs(2));
    let r = pay().await;
    assert_eq!(r.status, 201, "writes resume: {}", r.body);
    acknowledged.push((
        r.body["payment_id"].as_str().unwrap().to_owned(),
        r.body["status"].clone(),
    ));
    // Committed, as another connection sees them: payd's own connection would also show what
    // a transaction that was never committed holds.
    let other = sea_orm::Database::connect(db.url.as_str()).await.unwrap();
    for (id, status) in &acknowledged {
        let stored = payd_entity::payment::Entity::find_by_id(
            payd::ids::PaymentId::parse(id).expect("a payment id"),
        )
        .one(&other)
        .await
        .unwrap();
        assert_eq!(
            stored.map(|p| p.status.as_str()),
            status.as_str(),
            "{id} is stored"
        );
    }
}

/// A PostgreSQL whose sessions are read-only — as a standby or a demoted primary's are — is an
/// unavailable database: writes answer 503 `database_unavailable` with `Retry-After` (never
/// 500) and readiness 503, and the instance takes writes again by itself, without a restart,
/// once the database does. (PostgreSQL only.)
#[actix_web::test]
async fn a_read_only_postgres_answers_503_and_readiness_follows_without_a_restart() {
    let db = Arc::new(TestDb::new().await);
    if !db.is_postgres() {
        return;
    }
    let app = spawn_with(db.clone(), &[("PAYD_DATABASE__ACQUIRE_TIMEOUT_MS", "500")]).await;
    let m = app.create_merchant("Acme").await;
    let pay = || {
        app.create_payment(
            &m,
            json!({"amount": 500, "currency": "USD", "confirm": true,
                "payment_method_data": card("4242424242424242")}),
        )
    };
    assert_eq!(pay().await.status, 201);
    let name = db
        .url
        .rsplit('/')
        .next()
        .and_then(|n| n.split('?').next())
        .unwrap()
        .to_owned();
    // Another database of the server: its sessions stay writable.
    let server = db.url.rsplit_once('/').unwrap().0;
    let admin = sea_orm::Database::connect(format!("{server}/postgres"))
        .await
        .unwrap();
    // New sessions of the database are read-only; the instance's sessions are ended, so the
    // ones it opens next are too.
    let read_only = |on: bool| {
        let (admin, name) = (&admin, &name);
        async move {
            let set = if on {
                format!("ALTER DATABASE {name} SET default_transaction_read_only = on")
            } else {
                format!("ALTER DATABASE {name} RESET default_transaction_read_only")
            };
            sea_orm::ConnectionTrait::execute_unprepared(admin, &set)
                .await
                .unwrap();
            let end = format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()");
            sea_orm::ConnectionTrait::execute_unprepared(admin, &end)
                .await
                .unwrap();
        }
    };
    read_only(true).await;
    let since = Instant::now();
    readiness_turns(&app, 503, since).await;
    for _ in 0..5 {
        let r = pay().await;
        assert_eq!(
            (r.status, r.code(), r.header("retry-after").is_some()),
            (503, "database_unavailable", true),
            "{}",
            r.body
        );
    }
    read_only(false).await;
    let since = Instant::now();
    let turned = readiness_turns(&app, 200, since).await;
    assert!(turned < Duration::from_secs(2), "{turned:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = pay().await;
        if r.status == 201 {
            break;
        }
        assert!(
            r.status == 503 && Instant::now() < deadline,
            "{} {}",
            r.status,
            r.body
        );
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = app.send(Method::GET, "/metrics", None, None, &[]).await;
    let text = String::from_utf8_lossy(&metrics.raw).into_owned();
    assert!(
        text.lines()
            .any(|l| l.starts_with("payd_database_outages_total") && !l.ends_with(" 0")),
        "the outage is counted"
    );
}

/// A key whose request the database failed under (503) is free as soon as the database
/// answers again, not when its lock lapses: the request's instance releases it then. Here the
/// database goes away while a confirm waits for its processor; the retry under the same key,
/// once it is back, runs (and resumes from what the first try committed) well before the
/// key's 60 s lock would have lapsed. (PostgreSQL only.)
#[actix_web::test]
async fn a_key_failed_by_an_outage_is_free_as_soon_as_the_database_answers() {
    let db = Arc::new(TestDb::new().await);
    if !db.is_postgres() {
        return;
    }
    let (proxy, proxied) = Proxy::before(&db).await;
    let app = spawn_with(
        db.clone(),
        &[
            ("PAYD_DATABASE_URL", proxied.as_str()),
            ("PAYD_DATABASE__ACQUIRE_TIMEOUT_MS", "500"),
            ("PAYD_IDEMPOTENCY__LOCK_SECS", "60"),
        ],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let (_sim, sim_url) = common::sim::start_sim().await;
    common::sim::add_remote(&app, &m, &sim_url, 5_000).await;
    // The processor answers the confirm after 1.5 s; the database goes away meanwhile.
    common::sim::fault(
        &sim_url,
        json!({"kind": "timeout", "delay_ms": 1500, "count": 1}),
    )
    .await;
    let body = json!({"amount": 500, "currency": "USD", "confirm": true,
        "payment_method_data": card("4242424242424242")});
    let headers = [
        ("x-profile-id", m.profile_id.as_str()),
        ("idempotency-key", "outage-1"),
    ];
    let send = || {
        app.send(
            Method::POST,
            "/payments",
            Some(&m.secret_key),
            Some(&body),
            &headers,
        )
    };
    let (first, ()) = futures_util::join!(send(), async {
        actix_web::rt::time::sleep(Duration::from_millis(700)).await;
        proxy.down();
    });
    assert_eq!(
        (first.status, first.code()),
        (503, "database_unavailable"),
        "{}",
        first.body
    );
    proxy.back();
    let back = Instant::now();
    let answer = loop {
        let r = send().await;
        if r.status < 300 {
            break r;
        }
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "the key stays taken: {} {}",
            r.status,
            r.body
        );
        actix_web::rt::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(answer.body["status"], "succeeded", "{}", answer.body);
    let payments = payd_entity::payment::Entity::find()
        .all(&db_conn(&db).await)
        .await
        .unwrap();
    assert_eq!(payments.len(), 1, "one key, one payment");
}

async fn db_conn(db: &TestDb) -> sea_orm::DatabaseConnection {
    sea_orm::Database::connect(&db.url).await.unwrap()
}

/// A failover pair's URL (`h1,h2` with `target_session_attrs=read-write`, as `pg_autoctl show
/// uri` prints it): payd starts on the first host that takes writes, passing over one that
/// refuses connections, and when its host goes away it follows to the next one by itself —
/// no restart, no new configuration. Two TCP fronts to one PostgreSQL stand for the pair.
/// (PostgreSQL only.)
#[actix_web::test]
async fn a_multi_host_url_starts_on_a_writable_host_and_follows_a_failover() {
    let db = Arc::new(TestDb::new().await);
    if !db.is_postgres() {
        return;
    }
    let ((first, one), (second, two)) = (Proxy::before(&db).await, Proxy::before(&db).await);
    // Both fronts' hosts in one URL: `…@127.0.0.1:p1,127.0.0.1:p2/db…`.
    let host_of = |url: &str| {
        url.split_once('@')
            .unwrap()
            .1
            .split_once('/')
            .unwrap()
            .0
            .to_owned()
    };
    let pair = one.replacen(
        &host_of(&one),
        &format!("{},{}", host_of(&one), host_of(&two)),
        1,
    );
    let query = if pair.contains('?') { "&" } else { "?" };
    let pair = format!("{pair}{query}target_session_attrs=read-write");
    // The first host is down at start: payd starts on the second.
    first.down();
    let app = spawn_with(
        db.clone(),
        &[
            ("PAYD_DATABASE_URL", pair.as_str()),
            ("PAYD_DATABASE__ACQUIRE_TIMEOUT_MS", "500"),
        ],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let pay = || {
        app.create_payment(
            &m,
            json!({"amount": 500, "currency": "USD", "confirm": true,
                "payment_method_data": card("4242424242424242")}),
        )
    };
    assert_eq!(pay().await.status, 201);
    // The second host goes away; the first is back: payd follows to it.
    first.back();
    second.down();
    let lost = Instant::now();
    loop {
        let r = pay().await;
        if r.status == 201 {
            break;
        }
        assert_eq!(
            (r.status, r.code()),
            (503, "database_unavailable"),
            "{}",
            r.body
        );
        assert!(
            lost.elapsed() < Duration::from_secs(10),
            "never followed the failover"
        );
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
    let followed = lost.elapsed();
    assert!(followed < Duration::from_secs(5), "{followed:?}");
    readiness_turns(&app, 200, Instant::now()).await;
}
