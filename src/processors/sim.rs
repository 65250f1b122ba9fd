//! The reference processor simulator (`payd-processor-sim`): it speaks the remote protocol,
//! keeps its payments in memory, answers a repeated idempotency key with its first answer,
//! and can be told (`POST /_control/fault`) to answer the next requests slowly, too late,
//! with a 5xx, or with an account that contradicts payd's.

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicI64, AtomicU32, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use actix_web::{dev::ServerHandle, web, App, HttpRequest, HttpResponse, HttpServer};
use dashmap::DashMap;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{card::TestBehaviour, remote::sign};

/// A fault applied to the next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Process, then answer after `delay_ms`.
    Slow,
    /// Process, then answer after `delay_ms` (meant to exceed payd's timeout: the answer is lost).
    Timeout,
    /// Answer 500 without processing.
    Error,
    /// Never process; answer 503 after `delay_ms` (a request lost on its way: with a delay
    /// past payd's timeout, payd cannot tell it from a timeout).
    Lost,
    /// Process; a later sync reports another amount than the one authorized.
    Mismatch,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub delay_ms: u64,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone)]
struct SimPayment {
    amount: i64,
    authorized: i64,
    captured: i64,
    status: &'static str,
    mismatch: bool,
    /// The authorization asked to capture at once (also after a challenge).
    capture: bool,
}

/// The simulator's memory.
pub struct Sim {
    secret: String,
    payments: DashMap<String, SimPayment>,
    refunds: DashMap<String, &'static str>,
    /// Each payment's refunds by reference: (refund reference, amount).
    payment_refunds: DashMap<String, Vec<(String, i64)>>,
    answers: DashMap<String, Value>,
    faults: Mutex<VecDeque<Fault>>,
    /// Money-moving operations actually applied (not replays).
    pub captures: AtomicU32,
    pub authorizations: AtomicU32,
    pub refunds_done: AtomicU32,
    /// Amounts actually captured (at authorization or later) and refunded.
    pub captured_amount: AtomicI64,
    pub refunded_amount: AtomicI64,
    /// The card fingerprints authorizations came with, in order.
    pub fingerprints: Mutex<Vec<String>>,
}

impl Sim {
    pub fn new(secret: &str) -> Arc<Self> {
        Arc::new(Self {
            secret: secret.to_owned(),
            payments: DashMap::new(),
            refunds: DashMap::new(),
            payment_refunds: DashMap::new(),
            answers: DashMap::new(),
            faults: Mutex::new(VecDeque::new()),
            captures: AtomicU32::new(0),
            authorizations: AtomicU32::new(0),
            refunds_done: AtomicU32::new(0),
            captured_amount: AtomicI64::new(0),
            refunded_amount: AtomicI64::new(0),
            fingerprints: Mutex::new(Vec::new()),
        })
    }

    fn next_fault(&self) -> Option<Fault> {
        let mut faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        let front = faults.front_mut()?;
        let fault = front.clone();
        front.count -= 1;
        if front.count == 0 {
            faults.pop_front();
        }
        Some(fault)
    }

    /// Applies a refund of the payment behind `reference`.
    fn refund(&self, reference: &str, refund_reference: &str, amount: i64) {
        self.refunds_done.fetch_add(1, Ordering::SeqCst);
        self.refunded_amount.fetch_add(amount, Ordering::SeqCst);
        self.refunds
            .insert(refund_reference.to_owned(), "succeeded");
        self.payment_refunds
            .entry(reference.to_owned())
            .or_default()
            .push((refund_reference.to_owned(), amount));
    }

    /// An authorization: the card's test number tells the outcome.
    fn authorize(&self, reference: String, body: &Value, mismatch: bool) -> Value {
        self.authorizations.fetch_add(1, Ordering::SeqCst);
        if let Some(print) = body["card"]["fingerprint"].as_str() {
            let mut prints = self.fingerprints.lock().unwrap_or_else(|e| e.into_inner());
            prints.push(print.to_owned());
        }
        let amount = body["amount"].as_i64().unwrap_or(0);
        let behaviour = body["card"]["number"].as_str().map_or(
            TestBehaviour::Approve,
            crate::processors::card::test_behaviour,
        );
        let capture = body["capture"].as_bool().unwrap_or(false);
        let (status, answer) = match behaviour {
            TestBehaviour::Decline | TestBehaviour::ChargesDeclined => (
                "declined",
                json!({"status": "declined", "decline_code": "card_declined", "retryable": true}),
            ),
            TestBehaviour::InsufficientFunds => (
                "declined",
                json!({"status": "declined", "decline_code": "insufficient_funds", "retryable": true}),
            ),
            TestBehaviour::StolenCard => (
                "declined",
                json!({"status": "declined", "decline_code": "stolen_card", "retryable": false}),
            ),
            TestBehaviour::Challenge => ("challenge", json!({"status": "challenge"})),
            TestBehaviour::Async
            | TestBehaviour::Timeout
            | TestBehaviour::Review
            | TestBehaviour::SyncMismatch => ("pending", json!({"status": "pending"})),
            _ if capture => ("captured", json!({"status": "approved", "amount": amount})),
            _ => (
                "authorized",
                json!({"status": "approved", "amount": amount}),
            ),
        };
        let authorized = if matches!(status, "captured" | "authorized") {
            amount
        } else {
            0
        };
        if status == "captured" {
            self.captured_amount.fetch_add(amount, Ordering::SeqCst);
        }
        self.payments.insert(
            reference,
            SimPayment {
                amount,
                authorized,
                captured: if status == "captured" { amount } else { 0 },
                status,
                mismatch,
                capture,
            },
        );
        answer
    }

    /// The buyer's answer to a 3-D Secure challenge.
    fn challenge(&self, reference: &str, body: &Value) -> Value {
        match self.payments.get_mut(reference) {
            Some(mut p) if body["approved"].as_bool() == Some(true) => {
                p.authorized = p.amount;
                p.status = if p.capture { "captured" } else { "authorized" };
                if p.capture {
                    p.captured = p.amount;
                    self.captured_amount.fetch_add(p.amount, Ordering::SeqCst);
                }
                json!({"status": "approved", "amount": p.amount})
            }
            Some(mut p) => {
                p.status = "declined";
                json!({"status": "declined", "decline_code": "authentication_failed", "retryable": true})
            }
            None => json!({"error": "unknown reference"}),
        }
    }

    fn apply(&self, op: &str, body: &Value, mismatch: bool) -> Value {
        let reference = body["reference"].as_str().unwrap_or_default().to_owned();
        match op {
            "authorize" => self.authorize(reference, body, mismatch),
            "challenge" => self.challenge(&reference, body),
            "capture" => match self.payments.get_mut(&reference) {
                Some(mut p) => {
                    self.captures.fetch_add(1, Ordering::SeqCst);
                    let amount = body["amount"].as_i64().unwrap_or(0);
                    self.captured_amount.fetch_add(amount, Ordering::SeqCst);
                    p.captured += amount;
                    json!({"status": "captured", "captured_amount": p.captured})
                }
                None => json!({"error": "unknown reference"}),
            },
            "void" => match self.payments.get_mut(&reference) {
                Some(mut p) => {
                    p.status = "voided";
                    json!({"status": "voided"})
                }
                None => json!({"error": "unknown reference"}),
            },
            "sync" => match self.payments.get_mut(&reference) {
                Some(mut p) => {
                    // Pending payments settle on the first sync.
                    if p.status == "pending" {
                        p.status = "authorized";
                        p.authorized = p.amount;
                    }
                    let amount = if p.mismatch || mismatch {
                        p.authorized - 1
                    } else {
                        p.authorized
                    };
                    json!({"status": p.status, "amount": amount, "captured_amount": p.captured})
                }
                None => json!({"status": "unknown"}),
            },
            "refund" => {
                let key = body["refund_reference"].as_str().unwrap_or_default();
                self.refund(&reference, key, body["amount"].as_i64().unwrap_or(0));
                json!({"status": "succeeded"})
            }
            "refunds" => {
                let listed: Vec<Value> = self
                    .payment_refunds
                    .get(&reference)
                    .map(|r| r.value().clone())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(r, amount)| json!({"refund_reference": r, "amount": amount, "status": "succeeded"}))
                    .collect();
                json!({"refunds": listed})
            }
            "refund-sync" => {
                let key = body["refund_reference"].as_str().unwrap_or_default();
                json!({"status": self.refunds.get(key).map_or("failed", |s| *s)})
            }
            _ => json!({"error": "unknown operation"}),
        }
    }
}

async fn operation(
    req: HttpRequest,
    body: web::Bytes,
    op: web::Path<String>,
    sim: web::Data<Arc<Sim>>,
) -> HttpResponse {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let timestamp: i64 = header("x-payd-timestamp").parse().unwrap_or(0);
    if header("x-payd-signature") != sign(&sim.secret, timestamp, &body) {
        return HttpResponse::Unauthorized().json(json!({"error": "bad signature"}));
    }
    let Ok(parsed) = serde_json::from_slice::<Value>(&body) else {
        return HttpResponse::BadRequest().json(json!({"error": "not JSON"}));
    };
    let key = format!("{}:{}", op.as_str(), header("idempotency-key"));
    let fault = sim.next_fault();
    match fault.as_ref().map(|f| (f.kind, f.delay_ms)) {
        Some((FaultKind::Error, _)) => {
            return HttpResponse::InternalServerError().json(json!({"error": "simulated failure"}))
        }
        Some((FaultKind::Lost, delay_ms)) => {
            actix_web::rt::time::sleep(Duration::from_millis(delay_ms)).await;
            return HttpResponse::ServiceUnavailable().json(json!({"error": "request lost"}));
        }
        _ => {}
    }
    // Invariant: one idempotency key, one effect; a repeat gets the first answer.
    let answer = match sim.answers.get(&key) {
        Some(a) => a.clone(),
        None => {
            let mismatch = fault
                .as_ref()
                .is_some_and(|f| f.kind == FaultKind::Mismatch);
            let a = sim.apply(op.as_str(), &parsed, mismatch);
            if !matches!(op.as_str(), "sync" | "refund-sync" | "refunds") {
                sim.answers.insert(key, a.clone());
            }
            a
        }
    };
    if let Some(f) = fault.filter(|f| matches!(f.kind, FaultKind::Slow | FaultKind::Timeout)) {
        actix_web::rt::time::sleep(Duration::from_millis(f.delay_ms)).await;
    }
    if answer.get("error").is_some() {
        return HttpResponse::Conflict().json(answer);
    }
    HttpResponse::Ok().json(answer)
}

async fn control(fault: web::Json<Fault>, sim: web::Data<Arc<Sim>>) -> HttpResponse {
    sim.faults
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_back(fault.into_inner());
    HttpResponse::NoContent().finish()
}

/// A refund made at the processor without payd (as from its dashboard).
#[derive(Debug, Deserialize)]
struct OutsideRefund {
    reference: String,
    amount: i64,
}

async fn refund_outside(body: web::Json<OutsideRefund>, sim: web::Data<Arc<Sim>>) -> HttpResponse {
    let refund_reference = format!("sim_re_{}", uuid::Uuid::now_v7().simple());
    sim.refund(&body.reference, &refund_reference, body.amount);
    HttpResponse::Ok().json(json!({"refund_reference": refund_reference}))
}

async fn stats(sim: web::Data<Arc<Sim>>) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "authorizations": sim.authorizations.load(Ordering::SeqCst),
        "captures": sim.captures.load(Ordering::SeqCst),
        "refunds": sim.refunds_done.load(Ordering::SeqCst),
        "captured_amount": sim.captured_amount.load(Ordering::SeqCst),
        "refunded_amount": sim.refunded_amount.load(Ordering::SeqCst),
    }))
}

/// Serves the simulator on `addr` (port 0 picks one); returns the port and a stop handle.
pub fn serve(
    addr: &str,
    sim: Arc<Sim>,
) -> std::io::Result<(u16, ServerHandle, actix_web::dev::Server)> {
    let data = web::Data::new(sim);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/v1/{op}", web::post().to(operation))
            .route("/_control/fault", web::post().to(control))
            .route("/_control/stats", web::get().to(stats))
            .route("/_control/refund", web::post().to(refund_outside))
    })
    .workers(1)
    .bind(addr)?;
    let port = server.addrs()[0].port();
    let server = server.run();
    Ok((port, server.handle(), server))
}
