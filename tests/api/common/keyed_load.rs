//! Keyed create+confirm load for the tests that take the database away under it (an outage,
//! a failover): clients that retry each payment with its `Idempotency-Key` as long as the
//! answer carries `Retry-After`, every try recorded, and the checks made afterwards — every
//! acknowledged payment there with the status it was acknowledged with, no key that made two
//! payments, every acknowledged payment announced.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use actix_web::http::Method;
use serde_json::{json, Value};

use super::{card, receiver::Receiver, Merchant, TestApp};

/// What one try of a create+confirm got.
#[derive(Debug, Clone)]
pub struct Try {
    pub at: Instant,
    pub status: u16,
    pub code: String,
    pub retry_after: bool,
    /// The payment and its status, when it was acknowledged (201).
    pub payment: Option<(String, String)>,
}

/// Clients creating and confirming payments until stopped.
pub struct KeyedLoad {
    tries: Arc<Mutex<Vec<Try>>>,
    stop: Arc<AtomicBool>,
    clients: Vec<actix_web::rt::task::JoinHandle<()>>,
}

/// How long one payment is retried at most (its tries stop earlier when the load stops and
/// the last answer asked for no retry).
const RETRY_BUDGET: Duration = Duration::from_secs(60);

impl KeyedLoad {
    /// `clients` clients, each sending its tries round-robin over `bases` and pausing `pause`
    /// between payments. Each payment carries its key in `metadata.key`.
    pub fn start(bases: &[String], m: &Merchant, clients: usize, pause: Duration) -> Self {
        let tries: Arc<Mutex<Vec<Try>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let clients = (0..clients)
            .map(|c| {
                let (bases, tries, stop) = (bases.to_vec(), tries.clone(), stop.clone());
                let (key, shop) = (m.secret_key.clone(), m.profile_id.clone());
                actix_web::rt::spawn(async move {
                    let client = super::client();
                    let mut sent = 0usize;
                    for n in 0.. {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let idempotency_key = format!("client-{c}-payment-{n}");
                        let body = json!({"amount": 500, "currency": "USD", "confirm": true,
                            "payment_method_data": card("4242424242424242"),
                            "metadata": {"key": idempotency_key}});
                        let began = Instant::now();
                        while began.elapsed() < RETRY_BUDGET {
                            let base = &bases[sent % bases.len()];
                            sent += 1;
                            let answer = client
                                .post(format!("{base}/payments"))
                                .insert_header(("api-key", key.as_str()))
                                .insert_header(("x-profile-id", shop.as_str()))
                                .insert_header(("idempotency-key", idempotency_key.as_str()))
                                .timeout(Duration::from_secs(10))
                                .send_json(&body)
                                .await;
                            let Ok(mut res) = answer else {
                                actix_web::rt::time::sleep(Duration::from_millis(50)).await;
                                continue;
                            };
                            let status = res.status().as_u16();
                            let retry_after = res.headers().contains_key("retry-after");
                            let body: Value = res.json().await.unwrap_or_default();
                            let payment = (status == 201).then(|| {
                                let id = body["payment_id"].as_str().unwrap_or_default();
                                let status = body["status"].as_str().unwrap_or_default();
                                (id.to_owned(), status.to_owned())
                            });
                            tries.lock().unwrap().push(Try {
                                at: Instant::now(),
                                status,
                                code: body["error"]["code"]
                                    .as_str()
                                    .unwrap_or_default()
                                    .to_owned(),
                                retry_after,
                                payment,
                            });
                            if !retry_after {
                                break;
                            }
                            // As a client honouring Retry-After would, only sooner.
                            actix_web::rt::time::sleep(Duration::from_millis(50)).await;
                        }
                        actix_web::rt::time::sleep(pause).await;
                    }
                })
            })
            .collect();
        Self {
            tries,
            stop,
            clients,
        }
    }

    /// Stops the clients once each has its current payment answered, and returns every try.
    pub async fn finish(self) -> Vec<Try> {
        self.stop.store(true, Ordering::SeqCst);
        for c in self.clients {
            c.await.unwrap();
        }
        let tries = std::mem::take(&mut *self.tries.lock().unwrap());
        tries
    }
}

/// How many tries answered each status other than 201.
pub fn errors(tries: &[Try]) -> HashMap<u16, usize> {
    tries
        .iter()
        .filter(|t| t.status != 201)
        .fold(HashMap::new(), |mut n, t| {
            *n.entry(t.status).or_default() += 1;
            n
        })
}

/// Asserts that every error was 503 `database_unavailable` with `Retry-After`, or (a retry
/// whose earlier try still holds its key) 409 `idempotency_key_in_use` with `Retry-After`,
/// and that the database's absence was felt.
pub fn assert_only_retryable_errors(tries: &[Try]) {
    let errors = errors(tries);
    let unexpected: Vec<_> = tries
        .iter()
        .filter(|t| t.status != 201)
        .filter(|t| {
            !(t.retry_after
                && matches!(
                    (t.status, t.code.as_str()),
                    (503, "database_unavailable") | (409, "idempotency_key_in_use")
                ))
        })
        .take(5)
        .collect();
    assert!(
        unexpected.is_empty(),
        "every error a 503 (or a held key's 409) with Retry-After: {errors:?}, e.g. {unexpected:?}"
    );
    assert!(
        errors.get(&503).is_some_and(|n| *n > 0),
        "the database's absence was felt: {errors:?}"
    );
}

/// The acknowledged payments and the status each was acknowledged with.
pub fn acknowledged(tries: &[Try]) -> Vec<(String, String)> {
    tries.iter().filter_map(|t| t.payment.clone()).collect()
}

/// Asserts that every acknowledged payment is there with the status it was acknowledged
/// with, and that no key made two payments.
pub async fn assert_kept_and_made_once(app: &TestApp, m: &Merchant, acked: &[(String, String)]) {
    for (id, status) in acked {
        let p = app.get(&format!("/payments/{id}"), &m.secret_key).await;
        assert_eq!(p.body["status"], status.as_str(), "{id}: {}", p.body);
    }
    let mut made: HashMap<String, Vec<Value>> = HashMap::new();
    let mut after: Option<String> = None;
    for _ in 0..1000 {
        let mut query = json!({"limit": 100});
        if let Some(last) = &after {
            query["starting_after"] = json!(last);
        }
        let page = app
            .call(m, Method::POST, "/payments/list", Some(query))
            .await;
        assert_eq!(page.status, 200, "{}", page.body);
        let data = page.body["data"].as_array().unwrap();
        for p in data {
            let key = p["metadata"]["key"].as_str().unwrap_or_default().to_owned();
            made.entry(key).or_default().push(p.clone());
        }
        after = data
            .last()
            .map(|p| p["payment_id"].as_str().unwrap().to_owned());
        if page.body["has_more"] != true {
            break;
        }
    }
    let twice: Vec<_> = made.iter().filter(|(_, made)| made.len() > 1).collect();
    assert!(twice.is_empty(), "keys that made two payments: {twice:?}");
}

/// Waits (at most 30 s) until every acknowledged payment was announced at least once. Time
/// passes first: deliveries whose outcome could not be written keep their lease until it runs
/// out (the test's clock stands still otherwise), and are then claimed and sent again.
pub async fn assert_all_announced(app: &TestApp, receiver: &Receiver, acked: &[(String, String)]) {
    app.clock.advance(chrono::Duration::minutes(10));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let delivered: HashSet<String> = receiver
            .received()
            .iter()
            .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
            .filter_map(|e| {
                e["content"]["object"]["payment_id"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        let missing = acked
            .iter()
            .filter(|(id, _)| !delivered.contains(id))
            .count();
        if missing == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{missing} of {} acknowledged payments never announced",
            acked.len()
        );
        actix_web::rt::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Keeps the test's clock at the wall clock's pace (so that a key whose holder could not
/// release it is taken over once its lock lapses) until the returned task is aborted.
pub fn tick_with_wall_clock(app: &TestApp) -> actix_web::rt::task::JoinHandle<()> {
    let clock = app.clock.clone();
    actix_web::rt::spawn(async move {
        loop {
            actix_web::rt::time::sleep(Duration::from_millis(100)).await;
            clock.advance(chrono::Duration::milliseconds(100));
        }
    })
}
