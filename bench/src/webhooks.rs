//! The webhook phase and the in-bench receiver: payd's deliveries queue up while the receiver
//! holds its answers, then the time to drain the queue is measured. The receiver also counts
//! the raw awc POSTs of the baseline.

use std::{
    cell::RefCell,
    collections::{HashMap, HashSet},
    rc::Rc,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Mutex,
    },
    time::{Duration, Instant},
};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use anyhow::anyhow;
use awc::http::Method;
use serde_json::json;

use crate::{
    cpu::{Meter, PerOp},
    load::{drive, outcome, payment_body, Api, Outcome, Stats},
    server::{serve_local, Local},
};

/// Bounds the creation of the phase's payments, the wait for their deliveries, and how long
/// the receiver holds a request.
const WEBHOOK_LIMIT: Duration = Duration::from_secs(120);
/// payd's webhook settings for the run (see the webhook phase).
pub(crate) const BENCH_WEBHOOKS: [(&str, &str); 2] = [
    ("PAYD_WEBHOOKS__REQUEST_TIMEOUT_SECS", "60"),
    ("PAYD_WEBHOOKS__LEASE_SECS", "180"),
];

/// What the webhook phase measured.
pub(crate) struct WebhookRun {
    pub(crate) events: usize,
    pub(crate) received: usize,
    pub(crate) requests: u64,
    pub(crate) create_secs: f64,
    /// From opening the receiver to the last distinct event received.
    pub(crate) drain_secs: f64,
    /// Payments created at once.
    pub(crate) concurrency: usize,
    /// The CPU each event received cost while the queue drained (the drain only).
    pub(crate) cpu: Option<PerOp>,
}

impl WebhookRun {
    pub(crate) fn rate(&self) -> f64 {
        self.received as f64 / self.drain_secs.max(1e-9)
    }
}

/// What the receiver has seen: raw POSTs counted, webhook deliveries by distinct `webhook-id`.
/// While `held`, webhook requests wait (bounded) until `release`.
#[derive(Default)]
pub(crate) struct Received {
    pub(crate) raw: AtomicU64,
    hooks: Mutex<Hooks>,
    held: AtomicBool,
    opened: tokio::sync::Notify,
    /// While set (the paced end-to-end phase): when each payment's `payment_succeeded`
    /// first arrived, by payment id.
    arrivals: Mutex<Option<HashMap<String, Instant>>>,
}

impl Received {
    /// Distinct events and requests received so far.
    fn seen(&self) -> (usize, u64) {
        let h = self.hooks.lock().unwrap_or_else(|e| e.into_inner());
        (h.ids.len(), h.requests)
    }

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

/// Starts the receiver (one worker): `POST /raw` for the raw awc baseline, `POST /hooks` for
/// payd's webhook deliveries.
pub(crate) fn receiver() -> anyhow::Result<(Local, web::Data<Received>)> {
    let received = web::Data::new(Received::default());
    let recv_state = received.clone();
    let receiver = serve_local!(HttpServer::new(move || {
        App::new()
            .app_data(recv_state.clone())
            .route("/raw", web::post().to(receive_raw))
            .route("/hooks", web::post().to(receive_hook))
    })
    .workers(1));
    Ok((receiver, received))
}

async fn receive_raw(state: web::Data<Received>, _body: web::Bytes) -> HttpResponse {
    state.raw.fetch_add(1, Ordering::Relaxed);
    HttpResponse::NoContent().finish()
}

async fn receive_hook(
    req: HttpRequest,
    state: web::Data<Received>,
    body: web::Bytes,
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
    arrived(&state, &body, now);
    let mut h = state.hooks.lock().unwrap_or_else(|e| e.into_inner());
    h.requests += 1;
    if !id.is_empty() && h.ids.insert(id) {
        h.last = Some(now);
    }
    HttpResponse::NoContent().finish()
}

/// Notes when a payment's `payment_succeeded` arrived, while the paced end-to-end phase runs.
fn arrived(state: &Received, body: &[u8], at: Instant) {
    let mut arrivals = state.arrivals.lock().unwrap_or_else(|e| e.into_inner());
    let Some(arrivals) = arrivals.as_mut() else {
        return;
    };
    let Ok(event) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    if event["event_type"] != "payment_succeeded" {
        return;
    }
    if let Some(id) = event["content"]["object"]["payment_id"].as_str() {
        arrivals.entry(id.to_owned()).or_insert(at);
    }
}

/// Paced end to end: payments created and confirmed at `rate` a second for `secs`, the shop's
/// endpoint at the receiver, each timed from its request's sending to its `payment_succeeded`
/// arriving (committing, claiming, signing and delivering included). A payment whose event
/// never arrives (within the bound) counts as an error.
pub(crate) async fn paced_end_to_end(
    api: &Api,
    c: usize,
    rate: f64,
    secs: Duration,
    receiver: &str,
    received: &web::Data<Received>,
) -> anyhow::Result<Stats> {
    endpoint(api, receiver, true).await?;
    *received.arrivals.lock().unwrap_or_else(|e| e.into_inner()) = Some(HashMap::new());
    let sent: Rc<RefCell<Vec<(String, Instant)>>> = Rc::default();
    let (api2, body, sent2) = (api.clone(), payment_body(true, false), sent.clone());
    let run = drive(c, secs, Some(rate), move |_| {
        let (api, body, sent) = (api2.clone(), body.clone(), sent2.clone());
        async move {
            let at = Instant::now();
            match api.create_expect(body, "succeeded").await {
                Ok(id) => {
                    sent.borrow_mut().push((id, at));
                    Outcome::Ok
                }
                Err(e) => Outcome::Failed(e),
            }
        }
    })
    .await;
    let missing = |arrivals: &HashMap<String, Instant>| {
        sent.borrow()
            .iter()
            .filter(|(id, _)| !arrivals.contains_key(id))
            .count()
    };
    let deadline = Instant::now() + WEBHOOK_LIMIT;
    loop {
        let left = {
            let arrivals = received.arrivals.lock().unwrap_or_else(|e| e.into_inner());
            arrivals.as_ref().map_or(0, missing)
        };
        if left == 0 || Instant::now() >= deadline {
            break;
        }
        actix_web::rt::time::sleep(Duration::from_millis(5)).await;
    }
    let arrivals = received
        .arrivals
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_default();
    endpoint(api, receiver, false).await?;
    let mut lat_us: Vec<u64> = sent
        .borrow()
        .iter()
        .filter_map(|(id, at)| arrivals.get(id).map(|a| a.saturating_duration_since(*at)))
        .map(|d| d.as_micros() as u64)
        .collect();
    lat_us.sort_unstable();
    let lost = missing(&arrivals) as u64;
    Ok(Stats {
        ok: lat_us.len() as u64,
        errors: run.errors + lost,
        first_error: run
            .first_error
            .or_else(|| (lost > 0).then(|| format!("{lost} events never arrived"))),
        elapsed: run.elapsed,
        lat_us,
        cpu: None,
    })
}

/// Points `api`'s shop at the receiver, creates `events` payments (one `payment_succeeded`
/// each) while the receiver holds its answers, then opens it and times the drain.
pub(crate) async fn drain(
    api: &Api,
    c: usize,
    events: usize,
    receiver: &str,
    received: &web::Data<Received>,
    meter: &Meter,
) -> anyhow::Result<WebhookRun> {
    endpoint(api, receiver, true).await?;
    // The receiver holds its answers while the payments are created, so their events queue
    // up in payd (in the database, past the few requests in flight); then it opens and the
    // time to drain the queue is measured, apart from the time it took to create them.
    received.held.store(true, Ordering::SeqCst);
    let (ids, requests) = received.seen();
    let start = Instant::now();
    let created = create(api, c, events).await;
    let create_secs = start.elapsed().as_secs_f64();
    eprintln!(
        "payd-bench:   created {} ({} errors) in {create_secs:.1} s; opening the receiver",
        created.ok, created.errors
    );
    let mark = meter.mark().await;
    let opened = Instant::now();
    received.release();
    let run = finish(
        api,
        receiver,
        received,
        c,
        created.ok,
        (ids, requests),
        opened,
    )
    .await?;
    let cpu = Some(meter.per_op(&mark, run.received as u64).await);
    let run = WebhookRun {
        create_secs,
        cpu,
        ..run
    };
    eprintln!(
        "payd-bench:   {} events received in {:.1} s ({:.0}/s); {}",
        run.received,
        run.drain_secs,
        run.rate(),
        cpu.map(|c| c.summary()).unwrap_or_default()
    );
    Ok(run)
}

/// End to end: the shop's endpoint on and the receiver answering at once while `events`
/// payments are created with `c` in flight; the rate is the distinct events received from the
/// first create to the last event received (creating, committing, claiming, signing and
/// delivering together).
pub(crate) async fn end_to_end(
    api: &Api,
    c: usize,
    events: usize,
    receiver: &str,
    received: &web::Data<Received>,
) -> anyhow::Result<WebhookRun> {
    endpoint(api, receiver, true).await?;
    let seen = received.seen();
    let start = Instant::now();
    let created = create(api, c, events).await;
    let create_secs = start.elapsed().as_secs_f64();
    let run = finish(api, receiver, received, c, created.ok, seen, start).await?;
    let run = WebhookRun { create_secs, ..run };
    eprintln!(
        "payd-bench:   {} payments created in {create_secs:.1} s, their {} events received in {:.1} s ({:.0}/s)",
        created.ok,
        run.received,
        run.drain_secs,
        run.rate()
    );
    Ok(run)
}

/// Turns the shop's endpoint at the receiver on or off.
async fn endpoint(api: &Api, receiver: &str, enabled: bool) -> anyhow::Result<()> {
    let path = format!("/account/shops/{}/webhook", api.profile);
    let body = json!({ "url": format!("{receiver}/hooks"), "enabled": enabled });
    api.call(Method::PUT, &path, Some(serde_json::to_vec(&body)?.into()))
        .await
        .map_err(|e| anyhow!(e))?;
    Ok(())
}

/// Creates and confirms `n` payments (one `payment_succeeded` each), `c` in flight.
async fn create(api: &Api, c: usize, n: usize) -> crate::load::Stats {
    let n = n as u64;
    let (api2, body) = (api.clone(), payment_body(true, false));
    drive(c, WEBHOOK_LIMIT, None, move |k| {
        let (api, body) = (api2.clone(), body.clone());
        async move {
            if k >= n {
                return Outcome::Exhausted;
            }
            outcome(api.create_expect(body, "succeeded").await)
        }
    })
    .await
}

/// Waits (bounded) until the receiver has `expected` new events since `seen`, pauses the
/// endpoint so later phases carry no webhook traffic, and measures from `from` to the last new
/// event.
async fn finish(
    api: &Api,
    receiver: &str,
    received: &web::Data<Received>,
    concurrency: usize,
    expected: u64,
    (ids, requests): (usize, u64),
    from: Instant,
) -> anyhow::Result<WebhookRun> {
    let deadline = Instant::now() + WEBHOOK_LIMIT;
    while received.seen().0 - ids < expected as usize && Instant::now() < deadline {
        actix_web::rt::time::sleep(Duration::from_millis(5)).await;
    }
    endpoint(api, receiver, false).await?;
    let h = received.hooks.lock().unwrap_or_else(|e| e.into_inner());
    let last = h.last.unwrap_or_else(Instant::now);
    Ok(WebhookRun {
        events: expected as usize,
        received: h.ids.len() - ids,
        requests: h.requests - requests,
        create_secs: 0.0,
        drain_secs: last.saturating_duration_since(from).as_secs_f64(),
        concurrency,
        cpu: None,
    })
}
