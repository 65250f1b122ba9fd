//! The load generator: the closed or paced loop `drive` and its `Stats`, and the HTTP client
//! helpers every phase uses (`send`, a merchant's `Api`, the payment request bodies).

use std::{
    cell::{Cell, RefCell},
    future::Future,
    rc::Rc,
    time::{Duration, Instant},
};

use actix_web::web;
use anyhow::{anyhow, Context as _};
use awc::http::Method;
use serde_json::{json, Value};

use crate::{
    cpu::{Meter, PerOp},
    server::ADMIN_KEY,
};

/// What one operation of a phase came to.
pub(crate) enum Outcome {
    Ok,
    Failed(String),
    /// Nothing left to do (e.g. no payment left to refund): this worker stops.
    Exhausted,
    /// Refused by a rule the phase checks (a payout the balance does not cover): neither done
    /// nor failed, so counted as neither.
    Refused,
}

/// The result of one timed phase.
#[derive(Default, Clone)]
pub(crate) struct Stats {
    pub(crate) ok: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    pub(crate) elapsed: Duration,
    /// Latencies of the successful operations, in microseconds, sorted.
    pub(crate) lat_us: Vec<u64>,
    /// The CPU each successful operation cost, when the phase was metered.
    pub(crate) cpu: Option<PerOp>,
}

impl Stats {
    pub(crate) fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub(crate) fn pct_ms(&self, p: f64) -> f64 {
        if self.lat_us.is_empty() {
            return f64::NAN;
        }
        let i = ((p / 100.0) * (self.lat_us.len() - 1) as f64).round() as usize;
        self.lat_us[i.min(self.lat_us.len() - 1)] as f64 / 1000.0
    }

    pub(crate) fn summary(&self) -> String {
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
        if let Some(cpu) = &self.cpu {
            s.push_str(&format!("; {}", cpu.summary()));
        }
        s
    }
}

/// Runs a phase under `meter`: its stats with the CPU each successful operation cost.
pub(crate) async fn metered(meter: &Meter, phase: impl Future<Output = Stats>) -> Stats {
    let mark = meter.mark().await;
    let mut stats = phase.await;
    stats.cpu = Some(meter.per_op(&mark, stats.ok).await);
    stats
}

/// Runs `op` from `concurrency` tasks on this thread until `limit` has passed (or every task
/// is exhausted). With `pace` (operations a second) operation k starts at `k / pace` s and its
/// latency counts from that planned start, so a slow answer is not hidden by a late start.
pub(crate) async fn drive<F, Fut>(
    concurrency: usize,
    limit: Duration,
    pace: Option<f64>,
    op: F,
) -> Stats
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
                    Outcome::Refused => {}
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

pub(crate) fn outcome<T>(r: Result<T, String>) -> Outcome {
    match r {
        Ok(_) => Outcome::Ok,
        Err(e) => Outcome::Failed(e),
    }
}

pub(crate) fn client() -> awc::Client {
    awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .disable_redirects()
        .connector(awc::Connector::new().limit(1024))
        .finish()
}

/// Sends one request; `Ok` only for a 2xx, with the body.
pub(crate) async fn send(
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

/// A merchant's secret key and shop, as the merchant's server uses them.
#[derive(Clone)]
pub(crate) struct Api {
    pub(crate) client: awc::Client,
    pub(crate) base: Rc<str>,
    pub(crate) key: Rc<str>,
    pub(crate) profile: Rc<str>,
}

impl Api {
    pub(crate) async fn create_merchant(
        client: &awc::Client,
        base: &str,
        name: &str,
    ) -> anyhow::Result<Api> {
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

    pub(crate) async fn call(
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
    pub(crate) async fn create(&self, body: web::Bytes) -> Result<(String, String), String> {
        let raw = self.call(Method::POST, "/payments", Some(body)).await?;
        let v: Value = serde_json::from_slice(&raw).map_err(|e| e.to_string())?;
        let id = v["payment_id"].as_str().ok_or("no payment_id")?.to_owned();
        let status = v["status"].as_str().unwrap_or("").to_owned();
        Ok((id, status))
    }

    pub(crate) async fn create_expect(
        &self,
        body: web::Bytes,
        status: &str,
    ) -> Result<String, String> {
        let (id, got) = self.create(body).await?;
        if got != status {
            return Err(format!("payment {id} is {got}, expected {status}"));
        }
        Ok(id)
    }
}

/// The body of `POST /payments`: with `confirm`, a test card that succeeds; with `manual`,
/// manual capture.
pub(crate) fn payment_body(confirm: bool, manual: bool) -> web::Bytes {
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
