//! The remote processor: a processor reached over HTTP with the small JSON protocol of
//! `docs/processor-protocol.md`. Every request is signed (HMAC-SHA256 of timestamp and body)
//! and carries an idempotency key; a circuit breaker stops calling a processor that keeps
//! failing and lets one probe through after a cool-down.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::Sha256;

use super::model::{Authorization, ProcessorView};
use super::{
    Answer, AppliedRefund, AuthRequest, AuthResult, Processor, ProcessorError, RefundResult,
    RefundStatus, StoredCard,
};
use crate::outbound::{self, Blocked, Policy};

/// How an account reaches its processor (stored with the account).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RemoteConfig {
    pub url: String,
    /// Shared with the processor: signs every request.
    pub secret: String,
    pub timeout_ms: u64,
}

/// Opens after `threshold` consecutive failures; after `cooldown` one probe may pass, and its
/// outcome closes or reopens it.
#[derive(Debug)]
pub struct CircuitBreaker {
    threshold: u32,
    cooldown: Duration,
    failures: AtomicU32,
    /// Unix milliseconds until which the circuit is open (0: closed).
    open_until: AtomicI64,
    probing: AtomicBool,
}

impl CircuitBreaker {
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Self {
            threshold: threshold.max(1),
            cooldown,
            failures: AtomicU32::new(0),
            open_until: AtomicI64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    pub fn is_open(&self) -> bool {
        self.open_until.load(Ordering::Acquire) != 0
    }

    /// May a request go now? While open, no; after the cool-down, exactly one probe.
    pub fn allow(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return true;
        }
        crate::clock::wall_now().timestamp_millis() >= until
            && self
                .probing
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// Whether it would let a request through (without taking the probe).
    pub fn available(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        until == 0
            || (crate::clock::wall_now().timestamp_millis() >= until
                && !self.probing.load(Ordering::Acquire))
    }

    pub fn success(&self) {
        self.failures.store(0, Ordering::Release);
        self.probing.store(false, Ordering::Release);
        if self.open_until.swap(0, Ordering::AcqRel) != 0 {
            metrics::gauge!("payd_processor_circuits_open").decrement(1.0);
        }
    }

    pub fn failure(&self) {
        let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
        let probing = self.probing.swap(false, Ordering::AcqRel);
        if failures >= self.threshold || probing {
            let until =
                crate::clock::wall_now().timestamp_millis() + self.cooldown.as_millis() as i64;
            if self.open_until.swap(until, Ordering::AcqRel) == 0 {
                metrics::gauge!("payd_processor_circuits_open").increment(1.0);
                tracing::warn!(failures, "processor circuit opened");
            }
        }
    }
}

pub struct RemoteProcessor {
    inner: Arc<Inner>,
}

struct Inner {
    config: RemoteConfig,
    breaker: CircuitBreaker,
    /// Which addresses the processor's URL may reach.
    outbound: Arc<Policy>,
}

/// Signs a request body: `v1=<hex HMAC-SHA256(secret, "{timestamp}.{body}")>`.
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    format!(
        "v1={}",
        hex::encode(mac(secret, timestamp, body).finalize().into_bytes())
    )
}

/// The HMAC-SHA256 of `"{timestamp}.{body}"`: this protocol's signature, and Stripe's.
pub(super) fn mac(secret: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

impl RemoteProcessor {
    pub fn new(
        config: RemoteConfig,
        threshold: u32,
        cooldown: Duration,
        outbound: Arc<Policy>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                breaker: CircuitBreaker::new(threshold, cooldown),
                outbound,
            }),
        }
    }
}

/// The `outcome` labels of `payd_processor_requests_total`: answered, refused, timed out,
/// failed otherwise, not sent (circuit open).
const OUTCOMES: [&str; 5] = ["ok", "refused", "timeout", "error", "circuit_open"];

/// Makes the remote and Stripe processors' series exist at 0 from start-up.
pub fn register_metrics() {
    metrics::gauge!("payd_processor_circuits_open").increment(0.0);
    for outcome in ["approved", "declined", "unavailable", "unknown"] {
        metrics::counter!("payd_processor_outcomes_total", "account" => "sandbox", "outcome" => outcome)
            .increment(0);
    }
    for kind in ["remote", "stripe"] {
        for outcome in OUTCOMES {
            metrics::counter!("payd_processor_requests_total", "kind" => kind, "outcome" => outcome)
                .increment(0);
        }
    }
}

impl Inner {
    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        key: &str,
        body: Value,
    ) -> Result<T, ProcessorError> {
        if !self.breaker.allow() {
            metrics::counter!("payd_processor_requests_total", "kind" => "remote", "outcome" => OUTCOMES[4]).increment(1);
            return Err(ProcessorError::Unavailable("circuit open".into()));
        }
        let body = body.to_string();
        let timestamp = crate::clock::wall_now().timestamp();
        let client = outbound::client(&self.outbound)
            .timeout(Duration::from_millis(self.config.timeout_ms))
            .disable_redirects()
            .finish();
        let url = format!("{}/v1/{path}", self.config.url.trim_end_matches('/'));
        let sent = client
            .post(url)
            .insert_header(("content-type", "application/json"))
            .insert_header(("idempotency-key", key))
            .insert_header(("x-payd-timestamp", timestamp.to_string()))
            .insert_header((
                "x-payd-signature",
                sign(&self.config.secret, timestamp, body.as_bytes()),
            ))
            .send_body(body)
            .await;
        let outcome = match sent {
            Err(awc::error::SendRequestError::Timeout) => Err(ProcessorError::Timeout),
            Err(e) => Err(ProcessorError::Unavailable(match outbound::blocked(&e) {
                Some(ip) => Blocked(ip).to_string(),
                None => e.to_string(),
            })),
            Ok(mut res) => {
                let status = res.status();
                let bytes = res
                    .body()
                    .limit(1 << 20)
                    .await
                    .map_err(|e| ProcessorError::Unavailable(e.to_string()));
                match bytes {
                    Err(e) => Err(e),
                    Ok(bytes) if status.is_server_error() => Err(ProcessorError::Unavailable(
                        format!("{status}: {}", String::from_utf8_lossy(&bytes)),
                    )),
                    Ok(bytes) if status.is_client_error() => Err(ProcessorError::Refused(
                        String::from_utf8_lossy(&bytes).into_owned(),
                    )),
                    Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                        ProcessorError::Unavailable(format!("unreadable answer: {e}"))
                    }),
                }
            }
        };
        let label = match &outcome {
            Ok(_) => OUTCOMES[0],
            Err(ProcessorError::Refused(_)) => OUTCOMES[1],
            Err(ProcessorError::Timeout) => OUTCOMES[2],
            // The remote's answers are read above: none is unknown.
            Err(ProcessorError::Unavailable(_) | ProcessorError::Unknown(_)) => OUTCOMES[3],
        };
        metrics::counter!("payd_processor_requests_total", "kind" => "remote", "outcome" => label)
            .increment(1);
        match &outcome {
            Ok(_) | Err(ProcessorError::Refused(_)) => self.breaker.success(),
            Err(_) => self.breaker.failure(),
        }
        outcome
    }

    /// Money-moving calls whose answer was lost are sent again with the same key (twice at
    /// most): the processor answers the first outcome and never does it twice.
    async fn post_retrying<T: DeserializeOwned>(
        &self,
        path: &str,
        key: &str,
        body: Value,
    ) -> Result<T, ProcessorError> {
        let mut last = ProcessorError::Timeout;
        for _ in 0..3 {
            match self.post(path, key, body.clone()).await {
                Err(ProcessorError::Timeout) => last = ProcessorError::Timeout,
                other => return other,
            }
        }
        Err(last)
    }
}

/// The processor's answer to authorize and challenge.
#[derive(Debug, Deserialize)]
struct AuthAnswer {
    status: String,
    #[serde(default)]
    amount: Option<i64>,
    #[serde(default)]
    decline_code: Option<String>,
    #[serde(default)]
    decline_message: Option<String>,
    #[serde(default)]
    retryable: Option<bool>,
}

impl AuthAnswer {
    fn into_result(self, reference: String, asked: i64) -> Result<AuthResult, ProcessorError> {
        let outcome = match self.status.as_str() {
            "approved" | "partially_approved" => Authorization::Approved {
                amount: self.amount.unwrap_or(asked),
            },
            "declined" => Authorization::Declined {
                retryable: self.retryable.unwrap_or(true),
            },
            "challenge" => Authorization::ChallengeRequired,
            "review" => Authorization::ReviewRequired,
            "pending" => Authorization::Pending,
            other => {
                return Err(ProcessorError::Unavailable(format!(
                    "unknown status {other:?}"
                )))
            }
        };
        let error = (self.status == "declined").then(|| {
            (
                self.decline_code.unwrap_or_else(|| "card_declined".into()),
                self.decline_message
                    .unwrap_or_else(|| "the card was declined".into()),
            )
        });
        Ok(AuthResult {
            reference: Some(reference),
            outcome,
            error,
            token: None,
            resend: None,
            capture_before: None,
        })
    }
}

#[derive(Debug, Deserialize)]
struct SyncAnswer {
    status: String,
    #[serde(default)]
    amount: i64,
    #[serde(default)]
    captured_amount: i64,
    #[serde(default)]
    retryable: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct RefundAnswer {
    status: String,
    #[serde(default)]
    failure_reason: Option<String>,
}

fn refund_result(reference: String, a: RefundAnswer) -> RefundResult {
    RefundResult {
        reference,
        status: refund_status(a.status, a.failure_reason),
    }
}

fn refund_status(status: String, failure_reason: Option<String>) -> RefundStatus {
    match status.as_str() {
        "succeeded" => RefundStatus::Succeeded,
        "failed" => RefundStatus::Failed(
            failure_reason.unwrap_or_else(|| "refused by the processor".into()),
        ),
        _ => RefundStatus::Pending,
    }
}

/// The processor's list of a payment's refunds.
#[derive(Debug, Deserialize)]
struct RefundsAnswer {
    refunds: Vec<ListedRefund>,
}

#[derive(Debug, Deserialize)]
struct ListedRefund {
    refund_reference: String,
    amount: i64,
    status: String,
    #[serde(default)]
    failure_reason: Option<String>,
}

fn card_json(card: &StoredCard) -> Value {
    json!({"brand": card.brand, "last4": card.last4, "exp_month": card.exp_month, "exp_year": card.exp_year, "fingerprint": card.fingerprint})
}

impl Processor for RemoteProcessor {
    fn available(&self) -> bool {
        self.inner.breaker.available()
    }

    fn answer_deadline(&self) -> Duration {
        Duration::from_millis(self.inner.config.timeout_ms)
    }

    fn authorize(&self, req: AuthRequest) -> Answer<AuthResult> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let mut card = card_json(&req.card);
            if let Some(secret) = &req.secret {
                card["number"] = json!(secret.number);
                card["cvc"] = json!(secret.cvc);
            }
            let body = json!({"reference": req.reference, "payment_id": req.payment_id, "amount": req.amount,
                "currency": req.currency, "capture": req.capture, "partial_allowed": req.partial_allowed, "card": card});
            match inner
                .post::<AuthAnswer>("authorize", &req.reference, body)
                .await
            {
                Ok(a) => a.into_result(req.reference, req.amount),
                // No answer: the outcome is unknown, never a failure on a guess. A sync asks.
                Err(ProcessorError::Timeout) => Ok(AuthResult {
                    reference: Some(req.reference),
                    outcome: Authorization::Pending,
                    error: None,
                    token: None,
                    resend: None,
                    capture_before: None,
                }),
                Err(e) => Err(e),
            }
        })
    }

    fn complete_challenge(
        &self,
        reference: &str,
        approved: bool,
        _return_url: &str,
        _now: DateTime<Utc>,
    ) -> Answer<AuthResult> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        Box::pin(async move {
            let key = format!("{reference}.challenge");
            let a: AuthAnswer = inner
                .post(
                    "challenge",
                    &key,
                    json!({"reference": reference, "approved": approved}),
                )
                .await?;
            a.into_result(reference, 0)
        })
    }

    fn capture(&self, reference: &str, amount: i64, _currency: &str, key: &str) -> Answer<()> {
        let (inner, reference, key) = (self.inner.clone(), reference.to_owned(), key.to_owned());
        Box::pin(async move {
            let _: Value = inner
                .post_retrying(
                    "capture",
                    &key,
                    json!({"reference": reference, "amount": amount}),
                )
                .await?;
            Ok(())
        })
    }

    fn void(&self, reference: &str, key: &str) -> Answer<()> {
        let (inner, reference, key) = (self.inner.clone(), reference.to_owned(), key.to_owned());
        Box::pin(async move {
            let _: Value = inner
                .post_retrying("void", &key, json!({"reference": reference}))
                .await?;
            Ok(())
        })
    }

    fn sync(&self, reference: &str, _now: DateTime<Utc>) -> Answer<ProcessorView> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        Box::pin(async move {
            let key = format!("{reference}.sync.{}", uuid::Uuid::now_v7().simple());
            let a: SyncAnswer = inner
                .post("sync", &key, json!({"reference": reference}))
                .await?;
            Ok(match a.status.as_str() {
                "pending" => ProcessorView::Pending,
                "authorized" if a.captured_amount > 0 => ProcessorView::Captured {
                    amount: a.captured_amount,
                },
                "authorized" => ProcessorView::Authorized { amount: a.amount },
                "captured" => ProcessorView::Captured {
                    amount: a.captured_amount,
                },
                "declined" => ProcessorView::Declined {
                    retryable: a.retryable.unwrap_or(true),
                },
                "voided" => ProcessorView::Voided,
                "unknown" => ProcessorView::Unknown,
                _ => ProcessorView::Unchanged,
            })
        })
    }

    fn refund(
        &self,
        reference: &str,
        amount: i64,
        _currency: &str,
        _now: DateTime<Utc>,
        key: &str,
    ) -> Answer<RefundResult> {
        let (inner, reference, key) = (self.inner.clone(), reference.to_owned(), key.to_owned());
        Box::pin(async move {
            let refund_reference = key.clone();
            let body = json!({"reference": reference, "refund_reference": refund_reference, "amount": amount});
            let a: RefundAnswer = inner.post_retrying("refund", &key, body).await?;
            Ok(refund_result(refund_reference, a))
        })
    }

    fn refunds(&self, reference: &str) -> Answer<Vec<AppliedRefund>> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        Box::pin(async move {
            let key = format!("{reference}.refunds.{}", uuid::Uuid::now_v7().simple());
            let a: RefundsAnswer = inner
                .post("refunds", &key, json!({"reference": reference}))
                .await?;
            Ok(a.refunds
                .into_iter()
                .map(|r| AppliedRefund {
                    processor_reference: Some(r.refund_reference.clone()),
                    reference: r.refund_reference,
                    amount: r.amount,
                    status: refund_status(r.status, r.failure_reason),
                })
                .collect())
        })
    }

    fn sync_refund(&self, refund_reference: &str, _now: DateTime<Utc>) -> Answer<RefundResult> {
        let (inner, reference) = (self.inner.clone(), refund_reference.to_owned());
        Box::pin(async move {
            let key = format!("{reference}.sync.{}", uuid::Uuid::now_v7().simple());
            let a: RefundAnswer = inner
                .post("refund-sync", &key, json!({"refund_reference": reference}))
                .await?;
            Ok(refund_result(reference, a))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_breaker_opens_after_the_threshold_and_lets_one_probe_through() {
        let b = CircuitBreaker::new(3, Duration::from_millis(0));
        b.failure();
        b.failure();
        assert!(b.allow() && !b.is_open());
        b.failure();
        assert!(b.is_open());
        assert!(b.allow(), "the cool-down (0) is over: one probe");
        assert!(!b.allow(), "only one");
        b.success();
        assert!(!b.is_open() && b.allow());
        let slow = CircuitBreaker::new(1, Duration::from_secs(60));
        slow.failure();
        assert!(!slow.allow() && !slow.available());
    }

    #[test]
    fn signatures_cover_timestamp_and_body() {
        let a = sign("secret-secret-secret", 1, b"{}");
        assert!(a.starts_with("v1="));
        assert_ne!(a, sign("secret-secret-secret", 2, b"{}"));
        assert_ne!(a, sign("secret-secret-secret", 1, b"{ }"));
    }
}
