//! A PostgreSQL outage under load, as an operator would see it. Between payd and the database
//! sits a TCP proxy the test controls; "down" cuts every connection and refuses new ones,
//! which to payd is a database that went away. During the outage, no answer is 500: every
//! error is 503 `database_unavailable` with `Retry-After`. Readiness turns 503 within 2 s of
//! the stop and 200 within 2 s of the return. Every acknowledged payment is there with the
//! status it was acknowledged with, payments succeed within 1 s of the return, and the events
//! of every acknowledged payment are delivered afterwards. (PostgreSQL only: with
//! `TEST_DATABASE_URL` unset the test has nothing to stop and returns at once.)

mod common;

use std::{
    collections::{HashMap, HashSet},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use common::{card, receiver::Receiver, spawn_with, TestDb};
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

/// What one create+confirm got.
struct Answer {
    at: Instant,
    status: u16,
    retry_after: bool,
    payment: Option<(String, String)>,
}

/// How long after `since` readiness answers `status` (polled every 100 ms, at most 3 s).
async fn readiness_turns(app: &common::TestApp, status: u16, since: Instant) -> Duration {
    loop {
        let r = app
            .send(
                actix_web::http::Method::GET,
                "/health/ready",
                None,
                None,
                &[],
            )
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
    let (head, rest) = db.url.split_once("@").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let proxy = Proxy::start(host.to_owned()).await;
    let proxied = format!("{head}@127.0.0.1:{}/{path}", proxy.port);
    let app = spawn_with(
        db.clone(),
        &[
            ("PAYD_DATABASE_URL", proxied.as_str()),
            ("PAYD_DATABASE__ACQUIRE_TIMEOUT_MS", "500"),
        ],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let receiver = Receiver::start().await;
    let r = app
        .call(
            &m,
            actix_web::http::Method::PUT,
            &format!("/account/shops/{}/webhook", m.profile_id),
            Some(json!({"url": receiver.url})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);

    // Four clients create and confirm payments for 7 s; the database is away from 2 s to 5 s.
    let start = Instant::now();
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let mut clients = Vec::new();
    for _ in 0..4 {
        let (base, key, answers) = (app.base.clone(), m.secret_key.clone(), answers.clone());
        let shop = m.profile_id.clone();
        clients.push(actix_web::rt::spawn(async move {
            let client = common::client();
            while start.elapsed() < Duration::from_secs(7) {
                let body = json!({"amount": 500, "currency": "USD", "confirm": true,
                    "payment_method_data": card("4242424242424242")});
                let sent = client
                    .post(format!("{base}/payments"))
                    .insert_header(("api-key", key.as_str()))
                    .insert_header(("x-profile-id", shop.as_str()))
                    .timeout(Duration::from_secs(10))
                    .send_json(&body)
                    .await;
                let Ok(mut res) = sent else { continue };
                let status = res.status().as_u16();
                let retry_after = res.headers().contains_key("retry-after");
                let body: serde_json::Value = res.json().await.unwrap_or_default();
                let payment = (status == 200).then(|| {
                    let id = body["payment_id"].as_str().unwrap_or_default().to_owned();
                    (id, body["status"].as_str().unwrap_or_default().to_owned())
                });
                answers.lock().unwrap().push(Answer {
                    at: Instant::now(),
                    status,
                    retry_after,
                    payment,
                });
                if status != 200 {
                    // As a client honouring Retry-After would, only sooner.
                    actix_web::rt::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }));
    }
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
    at(Duration::from_secs(5)).await;
    proxy.back();
    let returned = Instant::now();
    let first_200 = readiness_turns(&app, 200, returned).await;
    assert!(
        first_200 <= Duration::from_secs(2),
        "readiness 200 after {first_200:?}"
    );
    for c in clients {
        c.await.unwrap();
    }

    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let errors: HashMap<u16, usize> =
        answers
            .iter()
            .filter(|a| a.status != 200)
            .fold(HashMap::new(), |mut n, a| {
                *n.entry(a.status).or_default() += 1;
                n
            });
    assert!(
        answers
            .iter()
            .filter(|a| a.status != 200)
            .all(|a| a.status == 503 && a.retry_after),
        "every error a 503 with Retry-After: {errors:?}"
    );
    assert!(
        errors.get(&503).is_some_and(|n| *n > 0),
        "the outage was felt: {errors:?}"
    );
    let back_ok = answers
        .iter()
        .filter(|a| a.status == 200 && a.at > returned)
        .map(|a| a.at - returned)
        .min()
        .expect("payments succeeded after the return");
    assert!(
        back_ok <= Duration::from_secs(1),
        "first success {back_ok:?} after the return"
    );

    let acknowledged: Vec<(String, String)> =
        answers.into_iter().filter_map(|a| a.payment).collect();
    for (id, status) in &acknowledged {
        let p = app.get(&format!("/payments/{id}"), &m.secret_key).await;
        assert_eq!(p.body["status"], status.as_str(), "{id}: {}", p.body);
    }
    // Deliveries whose outcome could not be written keep their lease until it runs out: time
    // passes (the test's clock stands still otherwise), and they are claimed and sent again.
    app.clock.advance(chrono::Duration::minutes(10));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let delivered: HashSet<String> = receiver
            .received()
            .iter()
            .filter_map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
            .filter_map(|e| {
                e["content"]["object"]["payment_id"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        let missing = acknowledged
            .iter()
            .filter(|(id, _)| !delivered.contains(id))
            .count();
        if missing == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{missing} of {} acknowledged payments never announced",
            acknowledged.len()
        );
        actix_web::rt::time::sleep(Duration::from_millis(200)).await;
    }
}
