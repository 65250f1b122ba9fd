//! The Stripe processor: a processor account of kind `stripe` speaks Stripe's own API
//! (PaymentMethods, Customers, PaymentIntents, Refunds) with the account's secret key, and
//! verifies the events Stripe posts back (`docs/processors/stripe.md`).
//!
//! Every POST carries an `Idempotency-Key` derived from payd's recorded intent and the pinned
//! `Stripe-Version`, so a request sent again after a lost answer is answered with the first
//! answer and never moves money twice. An authorization whose answer was lost has no
//! PaymentIntent id at payd: it is found again by the `payd_reference` in its metadata.
//!
//! Requests carry only parameters the real API documents, and only those that localstripe
//! (the server CI tests against) also models; the few answers where localstripe differs from
//! Stripe are read both ways, each noted where it is read.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use hmac::Mac;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::model::{Authorization, ProcessorView};
use super::remote::{mac, CircuitBreaker};
use super::{
    Answer, AppliedRefund, AuthRequest, AuthResult, Processor, ProcessorError, ProcessorToken,
    RefundResult, RefundStatus, SaveFor,
};
use crate::outbound::{self, Blocked, Policy};

/// Stripe's API, when an account names no other.
pub const API_BASE: &str = "https://api.stripe.com";
/// The API version every request pins: its PaymentIntents carry `latest_charge` and default
/// to card payments, so a confirm needs no `return_url`.
pub const API_VERSION: &str = "2022-11-15";
/// How old a signed event may be (Stripe's own libraries' default).
pub const SIGNATURE_TOLERANCE_SECS: i64 = 300;
/// How many pages of 100 recent PaymentIntents a lost authorization is looked for in.
const SEARCH_PAGES: usize = 5;

/// How an account reaches Stripe (stored sealed with the account).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StripeConfig {
    pub secret_key: String,
    pub webhook_secret: String,
    pub api_base: String,
    pub timeout_ms: u64,
}

impl StripeConfig {
    /// Whether the key is a test key (`sk_test_…`; `rk_test_…` for a restricted one).
    pub fn is_test_key(key: &str) -> bool {
        key.starts_with("sk_test_") || key.starts_with("rk_test_")
    }

    /// Whether the key is a live key.
    pub fn is_live_key(key: &str) -> bool {
        key.starts_with("sk_live_") || key.starts_with("rk_live_")
    }
}

/// Why Stripe did not do what it was asked.
#[derive(Debug, Clone)]
enum Failure {
    /// A card error (402): the card was declined.
    Card {
        code: String,
        message: String,
    },
    /// The secret key was refused (401, 403).
    Key,
    Processor(ProcessorError),
}

impl From<Failure> for ProcessorError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Card { code, message } => {
                ProcessorError::Refused(format!("{code}: {message}"))
            }
            Failure::Key => {
                ProcessorError::Refused("Stripe refused the account's secret key".into())
            }
            Failure::Processor(e) => e,
        }
    }
}

pub struct StripeProcessor {
    inner: Arc<Inner>,
}

struct Inner {
    /// payd's processor account id: the Stripe Customer and PaymentMethod ids payd keeps are
    /// valid at this account only.
    account_id: String,
    config: StripeConfig,
    breaker: CircuitBreaker,
    outbound: Arc<Policy>,
}

type Form = Vec<(String, String)>;

fn pair(k: &str, v: impl ToString) -> (String, String) {
    (k.to_owned(), v.to_string())
}

impl StripeProcessor {
    pub fn new(
        account_id: String,
        config: StripeConfig,
        threshold: u32,
        cooldown: Duration,
        outbound: Arc<Policy>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                account_id,
                config,
                breaker: CircuitBreaker::new(threshold, cooldown),
                outbound,
            }),
        }
    }
}

impl Inner {
    /// One request to Stripe: a POST (form-encoded, with its idempotency key) when `key` is
    /// set, a GET (with `form` as its query) when not.
    async fn call(&self, path: &str, key: Option<&str>, form: &Form) -> Result<Value, Failure> {
        if !self.breaker.allow() {
            count("circuit_open");
            return Err(Failure::Processor(ProcessorError::Unavailable(
                "circuit open".into(),
            )));
        }
        let client = outbound::client(&self.outbound)
            .timeout(Duration::from_millis(self.config.timeout_ms))
            .disable_redirects()
            .finish();
        let url = format!("{}/v1/{path}", self.config.api_base.trim_end_matches('/'));
        let request = match key {
            Some(_) => client.post(url),
            None => client.get(url),
        }
        .bearer_auth(&self.config.secret_key)
        .insert_header(("stripe-version", API_VERSION));
        let sent = match key {
            Some(key) => request
                .insert_header(("idempotency-key", key))
                .send_form(form),
            None => match request.query(form) {
                Ok(request) => request.send(),
                Err(e) => return Err(Failure::Processor(ProcessorError::Refused(e.to_string()))),
            },
        }
        .await;
        let outcome = match sent {
            Err(awc::error::SendRequestError::Timeout) => {
                Err(Failure::Processor(ProcessorError::Timeout))
            }
            Err(e) => Err(unavailable(match outbound::blocked(&e) {
                Some(ip) => Blocked(ip).to_string(),
                None => e.to_string(),
            })),
            Ok(mut res) => match res.body().limit(4 << 20).await {
                Err(e) => Err(unavailable(e.to_string())),
                Ok(bytes) => outcome(
                    res.status().as_u16(),
                    serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                ),
            },
        };
        if matches!(outcome, Err(Failure::Key)) {
            tracing::error!(account = %self.account_id, "Stripe refused the processor account's secret key");
        }
        // Stripe answered (a refusal included): the circuit stays closed.
        let (label, answered) = match &outcome {
            Ok(_) => ("ok", true),
            Err(Failure::Card { .. } | Failure::Key) => ("refused", true),
            Err(Failure::Processor(ProcessorError::Refused(_))) => ("refused", true),
            Err(Failure::Processor(ProcessorError::Timeout)) => ("timeout", false),
            Err(Failure::Processor(ProcessorError::Unavailable(_))) => ("error", false),
        };
        count(label);
        if answered {
            self.breaker.success();
        } else {
            self.breaker.failure();
        }
        outcome
    }

    async fn post(&self, path: &str, key: &str, form: Form) -> Result<Value, Failure> {
        self.call(path, Some(key), &form).await
    }

    async fn get(&self, path: &str, query: Form) -> Result<Value, Failure> {
        self.call(path, None, &query).await
    }

    /// The PaymentIntent behind a reference: a PaymentIntent id as it is; payd's own
    /// reference (an authorization whose answer was lost) by the `payd_reference` in the
    /// metadata of the account's recent PaymentIntents. `None`: Stripe has no such payment.
    async fn payment_intent(&self, reference: &str) -> Result<Option<Value>, Failure> {
        if reference.starts_with("pi_") {
            return self
                .get(&format!("payment_intents/{reference}"), vec![])
                .await
                .map(Some);
        }
        let mut after: Option<String> = None;
        for _ in 0..SEARCH_PAGES {
            let mut query = vec![pair("limit", 100)];
            if let Some(last) = &after {
                query.push(pair("starting_after", last));
            }
            let page = self.get("payment_intents", query).await?;
            let data = page["data"].as_array().cloned().unwrap_or_default();
            if let Some(found) = data
                .iter()
                .find(|pi| pi["metadata"]["payd_reference"].as_str() == Some(reference))
            {
                return Ok(Some(found.clone()));
            }
            match data.last().and_then(|pi| pi["id"].as_str()) {
                Some(last) if page["has_more"] == Value::Bool(true) => after = Some(last.into()),
                _ => break,
            }
        }
        Ok(None)
    }

    async fn intent_id(&self, reference: &str) -> Result<String, ProcessorError> {
        match self.payment_intent(reference).await? {
            Some(pi) => Ok(str_of(&pi, "id")),
            None => Err(ProcessorError::Refused(format!(
                "Stripe holds no payment for {reference}"
            ))),
        }
    }

    /// What Stripe captured of a succeeded PaymentIntent: `amount_received`. localstripe has
    /// no such field: its charge's amount, less the refund by which it records a partial
    /// capture's uncaptured rest (the one refund that names no PaymentIntent).
    async fn captured(&self, pi: &Value) -> Result<i64, Failure> {
        if let Some(received) = pi["amount_received"].as_i64() {
            return Ok(received);
        }
        let charge = &pi["latest_charge"];
        let amount = charge["amount"].as_i64().unwrap_or(0);
        let Some(charge_id) = charge["id"].as_str() else {
            return Ok(amount);
        };
        let refunds = self
            .get(
                "refunds",
                vec![pair("charge", charge_id), pair("limit", 100)],
            )
            .await?;
        let released: i64 = items(&refunds)
            .iter()
            .filter(|r| r["payment_intent"].is_null())
            .filter_map(|r| r["amount"].as_i64())
            .sum();
        Ok(amount - released)
    }

    /// Saves a card at Stripe: attaches its PaymentMethod to the customer's Stripe Customer
    /// (made now for a customer who has none at this account).
    async fn save(
        &self,
        req: &AuthRequest,
        save: &SaveFor,
        method: &str,
    ) -> Result<ProcessorToken, Failure> {
        let customer = match &save.known_customer {
            Some(known) => known.clone(),
            None => {
                let form = vec![pair("metadata[payd_customer_id]", &save.customer_id)];
                let key = format!("{}.customer", req.reference);
                str_of(&self.post("customers", &key, form).await?, "id")
            }
        };
        let form = vec![pair("customer", &customer)];
        let key = format!("{}.attach", req.reference);
        self.post(&format!("payment_methods/{method}/attach"), &key, form)
            .await?;
        Ok(ProcessorToken {
            account: self.account_id.clone(),
            customer,
            method: method.to_owned(),
        })
    }

    /// The PaymentMethod to charge: the saved one, or one made of the card just entered.
    async fn method(&self, req: &AuthRequest) -> Result<(String, Option<ProcessorToken>), Failure> {
        if let Some(token) = req.card.token_at(&self.account_id) {
            return Ok((token.method.clone(), Some(token.clone())));
        }
        let Some(secret) = &req.secret else {
            return Err(Failure::Processor(ProcessorError::Refused(
                "the card was saved at another processor: Stripe needs its number".into(),
            )));
        };
        let form = vec![
            pair("type", "card"),
            pair("card[number]", &secret.number),
            pair("card[exp_month]", req.card.exp_month),
            pair("card[exp_year]", req.card.exp_year),
            pair("card[cvc]", &secret.cvc),
        ];
        let created = self
            .post("payment_methods", &format!("{}.pm", req.reference), form)
            .await?;
        let method = str_of(&created, "id");
        let token = match &req.save {
            Some(save) => Some(self.save(req, save, &method).await?),
            None => None,
        };
        Ok((method, token))
    }

    async fn authorize(&self, req: &AuthRequest) -> Result<AuthResult, Failure> {
        let (method, token) = self.method(req).await?;
        let mut form = vec![
            pair("amount", req.amount),
            pair("currency", req.currency.to_ascii_lowercase()),
            pair("payment_method", &method),
            pair("confirm", "true"),
            pair(
                "capture_method",
                if req.capture { "automatic" } else { "manual" },
            ),
            pair("metadata[payd_payment_id]", &req.payment_id),
            pair("metadata[payd_reference]", &req.reference),
        ];
        if let Some(t) = &token {
            form.push(pair("customer", &t.customer));
        }
        if req.off_session && token.is_some() {
            form.push(pair("off_session", "true"));
        }
        let pi = self.post("payment_intents", &req.reference, form).await?;
        let mut result = self.auth_result(&pi).await?;
        result.token = token.filter(|_| req.save.is_some());
        Ok(result)
    }

    /// What a PaymentIntent says of its authorization.
    async fn auth_result(&self, pi: &Value) -> Result<AuthResult, Failure> {
        let amount = pi["amount"].as_i64().unwrap_or(0);
        let (outcome, error) = match pi["status"].as_str().unwrap_or("") {
            "succeeded" => (
                Authorization::Approved {
                    amount: self.captured(pi).await?,
                },
                None,
            ),
            "requires_capture" => (
                Authorization::Approved {
                    amount: pi["amount_capturable"].as_i64().unwrap_or(amount),
                },
                None,
            ),
            "requires_action" => (Authorization::ChallengeRequired, None),
            "processing" | "requires_confirmation" => (Authorization::Pending, None),
            "canceled" => (
                Authorization::Declined { retryable: false },
                Some((
                    "card_declined".to_owned(),
                    "the payment was canceled at Stripe".to_owned(),
                )),
            ),
            _ => {
                let error = &pi["last_payment_error"];
                let code = decline_code(error);
                let message = error["message"]
                    .as_str()
                    .unwrap_or("the card was declined")
                    .to_owned();
                (
                    Authorization::Declined {
                        retryable: retryable(&code),
                    },
                    Some((code, message)),
                )
            }
        };
        Ok(AuthResult {
            reference: Some(str_of(pi, "id")),
            outcome,
            error,
            token: None,
        })
    }

    async fn view(&self, pi: &Value) -> Result<ProcessorView, Failure> {
        let amount = pi["amount"].as_i64().unwrap_or(0);
        Ok(match pi["status"].as_str().unwrap_or("") {
            "succeeded" => ProcessorView::Captured {
                amount: self.captured(pi).await?,
            },
            "requires_capture" => ProcessorView::Authorized {
                amount: pi["amount_capturable"].as_i64().unwrap_or(amount),
            },
            "canceled" => ProcessorView::Voided,
            "requires_payment_method" if !pi["last_payment_error"].is_null() => {
                ProcessorView::Declined {
                    retryable: retryable(&decline_code(&pi["last_payment_error"])),
                }
            }
            _ => ProcessorView::Pending,
        })
    }
}

fn unavailable(why: String) -> Failure {
    Failure::Processor(ProcessorError::Unavailable(why))
}

/// What Stripe's answer means.
fn outcome(status: u16, body: Value) -> Result<Value, Failure> {
    let error = &body["error"];
    let message = error["message"].as_str().unwrap_or("").to_owned();
    match status {
        200..=299 if body.is_object() => Ok(body),
        200..=299 => Err(unavailable("an answer that is not a JSON object".into())),
        401 | 403 => Err(Failure::Key),
        // A card error. localstripe says `type: invalid_request_error` where Stripe says
        // `card_error`: the status decides.
        402 => Err(Failure::Card {
            code: decline_code(error),
            message: if message.is_empty() {
                "the card was declined".into()
            } else {
                message
            },
        }),
        // Too many requests, and Stripe's own failures: not done, ask again later.
        429 | 500..=599 => Err(unavailable(format!("Stripe answered {status}: {message}"))),
        _ => Err(Failure::Processor(ProcessorError::Refused(format!(
            "Stripe answered {status} ({}): {message}",
            error["code"].as_str().unwrap_or("no code")
        )))),
    }
}

fn count(outcome: &'static str) {
    metrics::counter!("payd_processor_requests_total", "kind" => "stripe", "outcome" => outcome)
        .increment(1);
}

fn str_of(v: &Value, field: &str) -> String {
    v[field].as_str().unwrap_or_default().to_owned()
}

fn items(list: &Value) -> Vec<Value> {
    list["data"].as_array().cloned().unwrap_or_default()
}

/// payd's code for a Stripe decline: the issuer's `decline_code` when Stripe passes it on
/// (`insufficient_funds`, `stolen_card` …), else Stripe's `code` (`card_declined`,
/// `expired_card`, `incorrect_cvc` …).
fn decline_code(error: &Value) -> String {
    error["decline_code"]
        .as_str()
        .or(error["code"].as_str())
        .filter(|c| !c.is_empty() && c.len() <= 60)
        .unwrap_or("card_declined")
        .to_owned()
}

/// Whether another processor may be tried after this decline, as the sandbox classifies the
/// same decline: a card reported lost or stolen, suspected fraud, or a card that cannot be
/// right (its number, expiry or CVC) fails at every processor; anything else may pass at the
/// next one.
pub fn retryable(code: &str) -> bool {
    !matches!(
        code,
        "stolen_card"
            | "lost_card"
            | "pickup_card"
            | "fraudulent"
            | "merchant_blacklist"
            | "restricted_card"
            | "expired_card"
            | "incorrect_cvc"
            | "invalid_cvc"
            | "incorrect_number"
            | "invalid_number"
            | "invalid_expiry_month"
            | "invalid_expiry_year"
            | "card_not_supported"
            | "currency_not_supported"
    )
}

fn refund_status(r: &Value) -> RefundStatus {
    match r["status"].as_str().unwrap_or("") {
        "succeeded" => RefundStatus::Succeeded,
        "failed" | "canceled" => RefundStatus::Failed(
            r["failure_reason"]
                .as_str()
                .unwrap_or("refused by Stripe")
                .to_owned(),
        ),
        _ => RefundStatus::Pending,
    }
}

impl Processor for StripeProcessor {
    fn available(&self) -> bool {
        self.inner.breaker.available()
    }

    fn answer_deadline(&self) -> Duration {
        Duration::from_millis(self.inner.config.timeout_ms)
    }

    fn authorize(&self, req: AuthRequest) -> Answer<AuthResult> {
        let inner = self.inner.clone();
        Box::pin(async move {
            match inner.authorize(&req).await {
                Ok(result) => Ok(result),
                Err(Failure::Card { code, message }) => Ok(AuthResult {
                    reference: None,
                    outcome: Authorization::Declined {
                        retryable: retryable(&code),
                    },
                    error: Some((code, message)),
                    token: None,
                }),
                // A refused key fails this attempt (routing falls back) and is logged; nothing
                // is sent again.
                Err(Failure::Key) => Ok(AuthResult {
                    reference: None,
                    outcome: Authorization::Declined { retryable: true },
                    error: Some((
                        "processor_authentication_failed".into(),
                        format!(
                            "Stripe refused the secret key of processor account {}",
                            inner.account_id
                        ),
                    )),
                    token: None,
                }),
                // Stripe refused the request itself (an amount it does not take, a card saved
                // at another processor): this attempt fails, routing may try the next one.
                Err(Failure::Processor(ProcessorError::Refused(why))) => Ok(AuthResult {
                    reference: None,
                    outcome: Authorization::Declined { retryable: true },
                    error: Some(("processor_refused".into(), why)),
                    token: None,
                }),
                // No answer: the outcome is unknown, never a failure on a guess. A sync finds
                // the PaymentIntent by its metadata.
                Err(Failure::Processor(ProcessorError::Timeout)) => Ok(AuthResult {
                    reference: Some(req.reference),
                    outcome: Authorization::Pending,
                    error: None,
                    token: None,
                }),
                Err(Failure::Processor(e)) => Err(e),
            }
        })
    }

    /// The buyer finished the challenge at Stripe (Stripe.js), or gave up on payd's page: the
    /// PaymentIntent says how it ended. One the buyer gave up on is canceled.
    fn complete_challenge(
        &self,
        reference: &str,
        approved: bool,
        _now: DateTime<Utc>,
    ) -> Answer<AuthResult> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        Box::pin(async move {
            let id = inner.intent_id(&reference).await?;
            let mut pi = inner.get(&format!("payment_intents/{id}"), vec![]).await?;
            if !approved && pi["status"] == "requires_action" {
                let key = format!("{id}.challenge");
                pi = inner
                    .post(&format!("payment_intents/{id}/cancel"), &key, vec![])
                    .await?;
            }
            if !approved && pi["status"] == "canceled" {
                return Ok(AuthResult {
                    reference: Some(id),
                    outcome: Authorization::Declined { retryable: true },
                    error: Some((
                        "authentication_failed".into(),
                        "the buyer did not complete 3-D Secure".into(),
                    )),
                    token: None,
                });
            }
            Ok(inner.auth_result(&pi).await?)
        })
    }

    fn capture(&self, reference: &str, amount: i64, key: &str) -> Answer<()> {
        let (inner, reference, key) = (self.inner.clone(), reference.to_owned(), key.to_owned());
        Box::pin(async move {
            let id = inner.intent_id(&reference).await?;
            let form = vec![pair("amount_to_capture", amount)];
            inner
                .post(&format!("payment_intents/{id}/capture"), &key, form)
                .await?;
            Ok(())
        })
    }

    fn void(&self, reference: &str, key: &str) -> Answer<()> {
        let (inner, reference, key) = (self.inner.clone(), reference.to_owned(), key.to_owned());
        Box::pin(async move {
            let id = inner.intent_id(&reference).await?;
            inner
                .post(&format!("payment_intents/{id}/cancel"), &key, vec![])
                .await?;
            Ok(())
        })
    }

    fn sync(&self, reference: &str, _now: DateTime<Utc>) -> Answer<ProcessorView> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        Box::pin(async move {
            match inner.payment_intent(&reference).await? {
                Some(pi) => Ok(inner.view(&pi).await?),
                None => Ok(ProcessorView::Unknown),
            }
        })
    }

    fn locate(&self, reference: &str) -> Answer<String> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        Box::pin(async move { inner.intent_id(&reference).await })
    }

    fn refund(
        &self,
        reference: &str,
        amount: i64,
        _now: DateTime<Utc>,
        key: &str,
    ) -> Answer<RefundResult> {
        let (inner, reference, key) = (self.inner.clone(), reference.to_owned(), key.to_owned());
        Box::pin(async move {
            let id = inner.intent_id(&reference).await?;
            let form = vec![
                pair("payment_intent", &id),
                pair("amount", amount),
                pair("metadata[payd_refund_id]", &key),
            ];
            let r = inner.post("refunds", &key, form).await?;
            Ok(RefundResult {
                reference: str_of(&r, "id"),
                status: refund_status(&r),
            })
        })
    }

    fn sync_refund(&self, refund_reference: &str, _now: DateTime<Utc>) -> Answer<RefundResult> {
        let (inner, reference) = (self.inner.clone(), refund_reference.to_owned());
        Box::pin(async move {
            let r = inner.get(&format!("refunds/{reference}"), vec![]).await?;
            Ok(RefundResult {
                reference,
                status: refund_status(&r),
            })
        })
    }

    /// The PaymentIntent's refunds: payd's own by the `payd_refund_id` in their metadata, the
    /// others (Stripe's dashboard) by their `re_…` id. localstripe records a partial capture's
    /// uncaptured rest as a refund naming no PaymentIntent: that one is not a refund.
    fn refunds(&self, reference: &str) -> Answer<Vec<AppliedRefund>> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        Box::pin(async move {
            let id = inner.intent_id(&reference).await?;
            let query = vec![pair("payment_intent", &id), pair("limit", 100)];
            let list = inner.get("refunds", query).await?;
            Ok(items(&list)
                .iter()
                .filter(|r| r["payment_intent"].as_str() == Some(id.as_str()))
                .map(|r| AppliedRefund {
                    reference: r["metadata"]["payd_refund_id"]
                        .as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| str_of(r, "id")),
                    amount: r["amount"].as_i64().unwrap_or(0),
                    status: refund_status(r),
                })
                .collect())
        })
    }

    fn forget(&self, token: &ProcessorToken) -> Answer<()> {
        let (inner, method) = (self.inner.clone(), token.method.clone());
        Box::pin(async move {
            let key = format!("{method}.detach");
            inner
                .post(&format!("payment_methods/{method}/detach"), &key, vec![])
                .await?;
            Ok(())
        })
    }
}

/// Why a Stripe event was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Stripe-Signature header is missing or malformed")]
    Malformed,
    #[error("the event is older than {SIGNATURE_TOLERANCE_SECS} seconds, or from the future")]
    Stale,
    #[error("no signature matches the account's webhook secret")]
    Mismatch,
}

/// Checks a `Stripe-Signature` header (`t=…,v1=…[,v1=…]`): some `v1` must be the
/// HMAC-SHA256 of `"{t}.{body}"` under the webhook secret, and `t` within the tolerance of
/// `now` (Unix seconds).
pub fn verify(secret: &str, header: &str, body: &[u8], now: i64) -> Result<(), SignatureError> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", s)) => {
                signatures.push(hex::decode(s).map_err(|_| SignatureError::Malformed)?)
            }
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed);
    }
    if (now - timestamp).abs() > SIGNATURE_TOLERANCE_SECS {
        return Err(SignatureError::Stale);
    }
    // Compared in constant time, each against the same MAC.
    let expected = mac(secret, timestamp, body);
    if signatures
        .iter()
        .any(|s| expected.clone().verify_slice(s).is_ok())
    {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// Signs an event as Stripe does: the `Stripe-Signature` header for `body` at `timestamp`.
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let signature = hex::encode(mac(secret, timestamp, body).finalize().into_bytes());
    format!("t={timestamp},v1={signature}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_is_checked_against_the_secret_the_body_and_the_clock() {
        let body = br#"{"id":"evt_1"}"#;
        let header = sign("whsec_test", 1_000, body);
        assert_eq!(verify("whsec_test", &header, body, 1_100), Ok(()));
        assert_eq!(
            verify("whsec_other", &header, body, 1_100),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify("whsec_test", &header, b"{}", 1_100),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(
                "whsec_test",
                &header,
                body,
                1_000 + SIGNATURE_TOLERANCE_SECS + 1
            ),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify("whsec_test", "v1=00", body, 1_000),
            Err(SignatureError::Malformed)
        );
        let rolled = format!(
            "t=1000,v1={},v1=00",
            &header[header.find("v1=").unwrap() + 3..]
        );
        assert_eq!(verify("whsec_test", &rolled, body, 1_000), Ok(()));
    }

    #[test]
    fn declines_keep_stripes_code_and_the_sandboxs_classes() {
        let generic = serde_json::json!({"code": "card_declined"});
        let issuer =
            serde_json::json!({"code": "card_declined", "decline_code": "insufficient_funds"});
        assert_eq!(decline_code(&generic), "card_declined");
        assert_eq!(decline_code(&issuer), "insufficient_funds");
        assert_eq!(decline_code(&Value::Null), "card_declined");
        assert!(retryable("card_declined") && retryable("insufficient_funds"));
        assert!(!retryable("stolen_card") && !retryable("expired_card"));
    }
}
