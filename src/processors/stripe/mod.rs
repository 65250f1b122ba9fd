//! The Stripe processor: a processor account of kind `stripe` speaks Stripe's own API
//! (PaymentMethods, Customers, PaymentIntents, Refunds) with the account's secret key, and
//! verifies the events Stripe posts back (`docs/processors/stripe.md`).
//!
//! Every POST carries an `Idempotency-Key` derived from payd's recorded intent and the pinned
//! `Stripe-Version`, so a request sent again after a lost answer is answered with the first
//! answer and never moves money twice. An answer that does not say what Stripe did (a 5xx, a
//! broken connection, a timeout) is never read as a refusal (`client`): an authorization stays
//! `Pending` and is recovered by the same request under the same key, then by its metadata
//! among the PaymentIntents made since it was sent. Amounts cross in Stripe's units (`units`).
//!
//! Requests carry only parameters the real API documents; the few answers where localstripe
//! (the server CI tests against) differs from Stripe are read both ways, each noted where it
//! is read.

mod answers;
mod client;
mod recovery;
mod signature;
pub mod units;

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::model::{Authorization, ProcessorView};
use super::remote::CircuitBreaker;
use super::{
    Answer, AppliedRefund, AuthRequest, AuthResult, Challenge, MethodCard, Processor,
    ProcessorError, ProcessorToken, Recovered, RefundResult, SaveFor,
};
use crate::outbound::Policy;
pub use answers::retryable;
use answers::{
    awaits_buyer, brand_of, decline_code, decline_of, declined, refund_status,
    AUTHENTICATION_REQUIRED,
};
use client::Failure;
pub use signature::{sign, verify, SignatureError, SIGNATURE_TOLERANCE_SECS};

/// Stripe's API, when an account names no other.
pub const API_BASE: &str = "https://api.stripe.com";
/// The API version every request pins: its PaymentIntents carry `latest_charge` and default
/// to card payments, so a confirm needs no `return_url`.
pub const API_VERSION: &str = "2022-11-15";
/// A Stripe account's timeout per request when it names none: Stripe's own libraries wait 80
/// seconds, and an authorization can take tens of seconds at the issuer.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// How many pages of 100 events one catch-up reads back at most.
const EVENT_PAGES: usize = 20;
/// The event types payd follows (`docs/processors/stripe.md`): those the catch-up reads back.
pub const FOLLOWED_EVENTS: [&str; 14] = [
    "payment_intent.succeeded",
    "payment_intent.payment_failed",
    "payment_intent.canceled",
    "payment_intent.amount_capturable_updated",
    "payment_intent.processing",
    "charge.captured",
    "charge.refunded",
    "charge.refund.updated",
    "refund.created",
    "refund.updated",
    "refund.failed",
    "charge.dispute.created",
    "charge.dispute.updated",
    "charge.dispute.closed",
];

/// How an account reaches Stripe (stored sealed with the account).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StripeConfig {
    pub secret_key: String,
    /// The signing secret of the account's webhook endpoint at Stripe; empty until the
    /// merchant sets it (the endpoint's URL names the account, so the account comes first).
    #[serde(default)]
    pub webhook_secret: String,
    /// The secret the last change replaced, still accepted until `previous_webhook_secret_until`
    /// (Stripe's roll keeps the old one working for a while: events already signed with it
    /// still arrive).
    #[serde(default)]
    pub previous_webhook_secret: Option<String>,
    #[serde(default)]
    pub previous_webhook_secret_until: Option<DateTime<Utc>>,
    pub api_base: String,
    pub timeout_ms: u64,
    /// The account's publishable key (`pk_test_…`/`pk_live_…`), with which the hosted
    /// checkout's Stripe.js makes the buyer's PaymentMethod; none: the page cannot.
    #[serde(default)]
    pub publishable_key: Option<String>,
    /// Whether payd may send Stripe card numbers typed in (Stripe's raw card data APIs, which
    /// need Stripe's approval and PCI DSS SAQ D); off, only Stripe.js's PaymentMethods.
    #[serde(default)]
    pub raw_card_data: bool,
    /// What follows the account's statement descriptor on the buyer's card statement
    /// (`statement_descriptor_suffix` on every PaymentIntent).
    #[serde(default)]
    pub statement_descriptor_suffix: Option<String>,
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

    /// The webhook secrets an event may be signed with now: the account's, and the one it
    /// replaced while that one is still accepted.
    pub fn webhook_secrets(&self, now: DateTime<Utc>) -> Vec<&str> {
        let previous = self.previous_webhook_secret.as_deref().filter(|_| {
            self.previous_webhook_secret_until
                .is_some_and(|until| now < until)
        });
        [Some(self.webhook_secret.as_str()), previous]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect()
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
    async fn post(&self, path: &str, key: &str, form: Form) -> Result<Value, Failure> {
        self.call(path, Some(key), &form).await
    }

    async fn get(&self, path: &str, query: Form) -> Result<Value, Failure> {
        self.call(path, None, &query).await
    }

    /// The PaymentIntent id of a payment's reference. payd's own reference stands in until a
    /// lost authorization is recovered (`recover`): no capture, void or refund reaches such a
    /// payment before.
    fn intent_id(reference: &str) -> Result<&str, Failure> {
        if reference.starts_with("pi_") {
            Ok(reference)
        } else {
            Err(Failure::Refused(format!(
                "the authorization {reference} is not yet found at Stripe"
            )))
        }
    }

    async fn payment_intent(&self, id: &str) -> Result<Value, Failure> {
        self.get(&format!("payment_intents/{id}"), vec![]).await
    }

    /// What Stripe captured of a succeeded PaymentIntent, in payd's units:
    /// `amount_received`. localstripe has no such field: its charge's amount, less the refund
    /// by which it records a partial capture's uncaptured rest (the one refund that names no
    /// PaymentIntent).
    async fn captured(&self, pi: &Value) -> Result<i64, Failure> {
        let currency = pi["currency"].as_str().unwrap_or_default();
        if let Some(received) = pi["amount_received"].as_i64() {
            return Ok(units::from_stripe(received, currency));
        }
        let charge = &pi["latest_charge"];
        let amount = charge["amount"].as_i64().unwrap_or(0);
        let Some(charge_id) = charge["id"].as_str() else {
            return Ok(units::from_stripe(amount, currency));
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
        Ok(units::from_stripe(amount - released, currency))
    }

    /// The customer's Stripe Customer, made now for a customer who has none at this account:
    /// a card saved is filed under it.
    async fn customer(&self, req: &AuthRequest, save: &SaveFor) -> Result<String, Failure> {
        if let Some(known) = &save.known_customer {
            return Ok(known.clone());
        }
        let form = vec![pair("metadata[payd_customer_id]", &save.customer_id)];
        let key = format!("{}.customer", req.reference);
        Ok(str_of(&self.post("customers", &key, form).await?, "id"))
    }

    /// The PaymentMethod to charge (the saved one, the one Stripe.js made, or one made of the
    /// card just entered) and the Stripe Customer it goes with: the one it is saved under, or,
    /// when the payment saves it, the customer's (Stripe attaches it when the payment
    /// succeeds, `setup_future_usage`).
    async fn method(&self, req: &AuthRequest) -> Result<(String, Option<String>), Failure> {
        let for_saving = async || match &req.save {
            Some(save) => Ok(Some(self.customer(req, save).await?)),
            None => Ok::<_, Failure>(None),
        };
        if let Some(token) = req.card.token_at(&self.account_id) {
            let customer = match &token.customer {
                Some(saved) => Some(saved.clone()),
                None => for_saving().await?,
            };
            return Ok((token.method.clone(), customer));
        }
        let Some(secret) = &req.secret else {
            return Err(Failure::Refused(
                "the card was saved at another processor: Stripe needs its number".into(),
            ));
        };
        let mut form = vec![
            pair("type", "card"),
            pair("card[number]", &secret.number),
            pair("card[exp_month]", req.card.exp_month),
            pair("card[exp_year]", req.card.exp_year),
            pair("card[cvc]", &secret.cvc),
        ];
        // The cardholder's name, for Stripe's fraud screening (docs.stripe.com/radar): Stripe
        // compares what it knows of the buyer with the card.
        if let Some(name) = &req.card.holder_name {
            form.push(pair("billing_details[name]", name));
        }
        let created = match self
            .post("payment_methods", &format!("{}.pm", req.reference), form)
            .await
        {
            // payd checked the card itself: Stripe refusing its number is the account's
            // configuration (not approved for raw card data), not the buyer's card.
            Err(Failure::Refused(why)) => return Err(Failure::Configuration(why)),
            made => made?,
        };
        Ok((str_of(&created, "id"), for_saving().await?))
    }

    async fn authorize(&self, req: &AuthRequest) -> Result<AuthResult, Failure> {
        let amount =
            units::to_stripe(req.amount, &req.currency).map_err(|e| Failure::Refused(e.0))?;
        let (method, customer) = self.method(req).await?;
        let mut form = vec![
            pair("amount", amount),
            pair("currency", req.currency.to_ascii_lowercase()),
            pair("payment_method", &method),
            pair("confirm", "true"),
            pair(
                "capture_method",
                if req.capture { "automatic" } else { "manual" },
            ),
            pair("metadata[payd_payment_id]", &req.payment_id),
            pair("metadata[payd_reference]", &req.reference),
            // The charge, for the card's `capture_before`.
            pair("expand[]", "latest_charge"),
            // 3-D Secure by Stripe's redirect (docs.stripe.com/payments/3d-secure/authentication-flow):
            // with a `return_url`, `next_action` is `redirect_to_url`, and the buyer comes back
            // to payd, which then reads the PaymentIntent.
            pair("return_url", &req.return_url),
        ];
        if let Some(customer) = &customer {
            form.push(pair("customer", customer));
        }
        // docs.stripe.com/payments/save-during-payment: Stripe attaches the card to the
        // customer when the payment succeeds, set up for the charges to come (a declined card
        // is never saved).
        if let Some(save) = &req.save {
            let usage = if save.off_session {
                "off_session"
            } else {
                "on_session"
            };
            form.push(pair("setup_future_usage", usage));
        }
        if req.off_session && customer.is_some() {
            form.push(pair("off_session", "true"));
        }
        // docs.stripe.com/get-started/account/statement-descriptors: the shop's name
        // for the payment on the buyer's statement, which a buyer who recognises it does not
        // dispute as fraud.
        if let Some(suffix) = &self.config.statement_descriptor_suffix {
            form.push(pair("statement_descriptor_suffix", suffix));
        }
        let pi = match self
            .call("payment_intents", Some(&req.reference), &form)
            .await
        {
            Ok(pi) => pi,
            // Stripe may have charged: never a decline. The same request under the same key
            // tells later (`recover`).
            Err(f) if f.maybe_done() => {
                tracing::warn!(payment_id = %req.payment_id, reference = %req.reference, error = ?f,
                    "Stripe's answer to an authorization is unknown: the payment stays processing");
                return Ok(AuthResult {
                    reference: Some(req.reference.clone()),
                    outcome: Authorization::Pending,
                    error: None,
                    token: None,
                    resend: serde_json::to_string(&form).ok(),
                    capture_before: None,
                });
            }
            Err(f) => return Err(f),
        };
        self.auth_result(&pi).await
    }

    /// What a PaymentIntent says of its authorization.
    async fn auth_result(&self, pi: &Value) -> Result<AuthResult, Failure> {
        let currency = pi["currency"].as_str().unwrap_or_default();
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
                    amount: units::from_stripe(
                        pi["amount_capturable"].as_i64().unwrap_or(amount),
                        currency,
                    ),
                },
                None,
            ),
            "requires_action" => (Authorization::ChallengeRequired, None),
            _ if awaits_buyer(pi) => (
                Authorization::ChallengeRequired,
                Some(decline_of(&pi["last_payment_error"])),
            ),
            "processing" | "requires_confirmation" => (Authorization::Pending, None),
            "canceled" => (
                Authorization::Declined { retryable: false },
                Some((
                    "card_declined".to_owned(),
                    "the payment was canceled at Stripe".to_owned(),
                )),
            ),
            _ => {
                let (code, message) = decline_of(&pi["last_payment_error"]);
                (
                    Authorization::Declined {
                        retryable: retryable(&code),
                    },
                    Some((code, message)),
                )
            }
        };
        // Until when the card's network lets the charge be captured
        // (docs.stripe.com/payments/place-a-hold-on-a-payment-method: `capture_before`).
        // A card the payment saves (`setup_future_usage`), once the payment is approved: the
        // PaymentMethod Stripe attached to the customer (a test PaymentMethod, `pm_card_visa`,
        // is charged as a new one). A declined or challenged payment saves nothing yet.
        let approved = matches!(outcome, Authorization::Approved { .. });
        let token = match (&pi["customer"], &pi["payment_method"]) {
            (Value::String(customer), method)
                if approved && !pi["setup_future_usage"].is_null() =>
            {
                method
                    .as_str()
                    .or(method["id"].as_str())
                    .map(|m| ProcessorToken {
                        account: self.account_id.clone(),
                        customer: Some(customer.clone()),
                        method: m.to_owned(),
                    })
            }
            _ => None,
        };
        let capture_before = pi["latest_charge"]["payment_method_details"]["card"]
            ["capture_before"]
            .as_i64()
            .and_then(|t| DateTime::<Utc>::from_timestamp(t, 0))
            .filter(|_| pi["status"] == "requires_capture");
        Ok(AuthResult {
            reference: Some(str_of(pi, "id")),
            outcome,
            error,
            token,
            resend: None,
            capture_before,
        })
    }

    async fn view(&self, pi: &Value) -> Result<ProcessorView, Failure> {
        let currency = pi["currency"].as_str().unwrap_or_default();
        let amount = pi["amount"].as_i64().unwrap_or(0);
        Ok(match pi["status"].as_str().unwrap_or("") {
            "succeeded" => ProcessorView::Captured {
                amount: self.captured(pi).await?,
            },
            "requires_capture" => ProcessorView::Authorized {
                amount: units::from_stripe(
                    pi["amount_capturable"].as_i64().unwrap_or(amount),
                    currency,
                ),
            },
            // docs.stripe.com/api/payment_intents/object#payment_intent_object-cancellation_reason:
            // `automatic` is Stripe's own cancel of an authorization left uncaptured.
            "canceled" if pi["cancellation_reason"] == "automatic" => ProcessorView::Lapsed,
            "canceled" => ProcessorView::Voided,
            _ if awaits_buyer(pi) => ProcessorView::AwaitsBuyer,
            "requires_payment_method" if !pi["last_payment_error"].is_null() => {
                ProcessorView::Declined {
                    retryable: retryable(&decline_code(&pi["last_payment_error"])),
                }
            }
            _ => ProcessorView::Pending,
        })
    }
}

fn count(outcome: &'static str) {
    metrics::counter!("payd_processor_requests_total", "kind" => "stripe", "outcome" => outcome)
        .increment(1);
}

/// Whether `id` is a Stripe dispute's: `du_…`, or `dp_…` for older ones
/// (docs.stripe.com/api/disputes/object), letters and digits after the prefix.
pub fn is_dispute_id(id: &str) -> bool {
    ["du_", "dp_"].iter().any(|p| {
        id.strip_prefix(p)
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
    })
}

/// A stored dispute id as a path segment, checked: never another path.
fn dispute_id(case: &str) -> Result<&str, Failure> {
    match is_dispute_id(case) {
        true => Ok(case),
        false => Err(Failure::Refused(format!("{case} is not a Stripe dispute"))),
    }
}

fn str_of(v: &Value, field: &str) -> String {
    v[field].as_str().unwrap_or_default().to_owned()
}

fn items(list: &Value) -> Vec<Value> {
    list["data"].as_array().cloned().unwrap_or_default()
}

impl Processor for StripeProcessor {
    fn available(&self) -> bool {
        self.inner.breaker.available()
    }

    fn takes_card_numbers(&self) -> bool {
        self.inner.config.raw_card_data
    }

    fn voids_challenges(&self) -> bool {
        true
    }

    fn keeps_cards(&self) -> bool {
        true
    }

    /// `next_action.redirect_to_url.url` of a PaymentIntent that `requires_action`
    /// (docs.stripe.com/api/payment_intents/object#payment_intent_object-next_action); any
    /// other (an off-session charge declined `authentication_required`) starts it when the
    /// buyer asks on payd's page.
    fn challenge(&self, reference: &str) -> Answer<Challenge> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        Box::pin(async move {
            let id = Inner::intent_id(&reference)?;
            let pi = inner.payment_intent(id).await?;
            let redirect = &pi["next_action"]["redirect_to_url"]["url"];
            Ok(match redirect.as_str() {
                Some(url) if pi["status"] == "requires_action" => Challenge::At(url.to_owned()),
                _ => Challenge::Started,
            })
        })
    }

    fn browser_key(&self) -> Option<String> {
        self.inner.config.publishable_key.clone()
    }

    /// The request's timeout and then some minutes: Stripe's lists may not yet show a request
    /// that was still arriving when payd gave up on its answer.
    fn answer_deadline(&self) -> Duration {
        Duration::from_millis(self.inner.config.timeout_ms)
            + recovery::RECOVERY_GRACE.to_std().unwrap_or_default()
    }

    fn refuses_amount(&self, amount: i64, currency: &str) -> Option<String> {
        units::to_stripe(amount, currency).err().map(|e| e.0)
    }

    /// Without multicapture (an opt-in of Stripe's, not used by payd), Stripe releases what a
    /// partial capture leaves (docs.stripe.com/payments/multicapture).
    fn captures_more_than_once(&self) -> bool {
        false
    }

    /// A succeeded PaymentIntent cannot be canceled: its money goes back by a refund.
    fn voids_captures(&self) -> bool {
        false
    }

    fn authorize(&self, req: AuthRequest) -> Answer<AuthResult> {
        let inner = self.inner.clone();
        Box::pin(async move {
            match inner.authorize(&req).await {
                Ok(result) => Ok(result),
                // docs.stripe.com/payments/save-during-payment#charge-saved-payment-method: an
                // off-session charge the issuer wants authenticated is Stripe's 402
                // `authentication_required`, its PaymentIntent kept to be confirmed with the
                // buyer there. It waits for the buyer (payd's challenge link) instead of
                // failing.
                Err(Failure::Card {
                    code,
                    message,
                    intent: Some(intent),
                }) if req.off_session && code == AUTHENTICATION_REQUIRED => Ok(AuthResult {
                    reference: Some(intent),
                    outcome: Authorization::ChallengeRequired,
                    error: Some((code, message)),
                    token: None,
                    resend: None,
                    capture_before: None,
                }),
                // The PaymentIntent Stripe made for the declined attempt stays its reference.
                Err(Failure::Card {
                    code,
                    message,
                    intent,
                }) => Ok(declined(code, message, intent)),
                // A refused key fails this attempt (routing falls back) and is logged; nothing
                // is sent again.
                Err(Failure::Key) => Ok(declined(
                    "processor_authentication_failed".into(),
                    format!(
                        "Stripe refused the secret key of processor account {}",
                        inner.account_id
                    ),
                    None,
                )),
                // Stripe refused the request itself (an amount it does not take, a card saved
                // at another processor): this attempt fails, routing may try the next one.
                Err(Failure::Refused(why)) => Ok(declined("processor_refused".into(), why, None)),
                // The account may not send card numbers: the merchant's configuration to fix,
                // which the code says apart from the buyer's card. The card was never tried:
                // no attempt is used up. Routing may try the next.
                Err(Failure::Configuration(why)) => Ok(AuthResult {
                    outcome: Authorization::Refused,
                    ..declined(
                        "processor_configuration".into(),
                        format!("Stripe refused the card number from this account: {why}"),
                        None,
                    )
                }),
                // Only a step before the PaymentIntent (the PaymentMethod, the Customer) can
                // leave an unknown answer here: nothing was charged, routing falls back.
                Err(f) => Err(ProcessorError::Unavailable(format!("{:?}", f))),
            }
        })
    }

    /// The buyer finished the challenge at Stripe, or gave up on payd's page: the
    /// PaymentIntent says how it ended. One the buyer gave up on is canceled. One that waits
    /// for the buyer to authenticate an off-session charge is confirmed now, the buyer there
    /// (docs.stripe.com/payments/save-during-payment#charge-saved-payment-method: the failed
    /// attempt's PaymentMethod, on the same PaymentIntent), and Stripe's page follows.
    fn complete_challenge(
        &self,
        reference: &str,
        approved: bool,
        return_url: &str,
        _now: DateTime<Utc>,
    ) -> Answer<AuthResult> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        let return_url = return_url.to_owned();
        Box::pin(async move {
            let id = Inner::intent_id(&reference)?;
            let mut pi = inner.payment_intent(id).await?;
            if approved && awaits_buyer(&pi) {
                let error = &pi["last_payment_error"];
                let Some(method) = error["payment_method"]["id"]
                    .as_str()
                    .or(pi["payment_method"].as_str())
                else {
                    return Err(ProcessorError::Refused(
                        "the PaymentIntent names no PaymentMethod to authenticate".into(),
                    ));
                };
                let form = vec![
                    pair("payment_method", method),
                    pair("return_url", &return_url),
                    pair("expand[]", "latest_charge"),
                ];
                let path = format!("payment_intents/{id}/confirm");
                pi = match inner.post(&path, &format!("{id}.authenticate"), form).await {
                    Ok(pi) => pi,
                    Err(Failure::Card { code, message, .. }) => {
                        return Ok(declined(code, message, Some(id.to_owned())))
                    }
                    Err(f) => return Err(f.into()),
                };
            }
            if !approved && pi["status"] == "requires_action" {
                let key = format!("{id}.challenge");
                pi = inner
                    .post(&format!("payment_intents/{id}/cancel"), &key, vec![])
                    .await?;
            }
            if !approved && pi["status"] == "canceled" {
                return Ok(AuthResult {
                    reference: Some(id.to_owned()),
                    outcome: Authorization::Declined { retryable: true },
                    error: Some((
                        "authentication_failed".into(),
                        "the buyer did not complete 3-D Secure".into(),
                    )),
                    token: None,
                    resend: None,
                    capture_before: None,
                });
            }
            Ok(inner.auth_result(&pi).await?)
        })
    }

    fn capture(&self, reference: &str, amount: i64, currency: &str, key: &str) -> Answer<()> {
        let (inner, reference, key) = (self.inner.clone(), reference.to_owned(), key.to_owned());
        let amount = units::to_stripe(amount, currency);
        Box::pin(async move {
            let id = Inner::intent_id(&reference)?;
            let amount = amount.map_err(|e| ProcessorError::Refused(e.0))?;
            let form = vec![pair("amount_to_capture", amount)];
            inner
                .post(&format!("payment_intents/{id}/capture"), &key, form)
                .await?;
            Ok(())
        })
    }

    /// Cancels the PaymentIntent. One already canceled (Stripe cancels an authorization
    /// unused for 7 days, or its dashboard did) is done: Stripe refuses to cancel it again.
    fn void(&self, reference: &str, key: &str) -> Answer<()> {
        let (inner, reference, key) = (self.inner.clone(), reference.to_owned(), key.to_owned());
        Box::pin(async move {
            let id = Inner::intent_id(&reference)?;
            match inner
                .post(&format!("payment_intents/{id}/cancel"), &key, vec![])
                .await
            {
                Ok(_) => Ok(()),
                Err(Failure::Refused(why)) => match inner.payment_intent(id).await {
                    Ok(pi) if pi["status"] == "canceled" => Ok(()),
                    _ => Err(ProcessorError::Refused(why)),
                },
                Err(f) => Err(f.into()),
            }
        })
    }

    fn sync(&self, reference: &str, _now: DateTime<Utc>) -> Answer<ProcessorView> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        Box::pin(async move {
            // A lost authorization is not synced but recovered (`recover`).
            let Ok(id) = Inner::intent_id(&reference) else {
                return Ok(ProcessorView::Pending);
            };
            let pi = inner.payment_intent(id).await?;
            Ok(inner.view(&pi).await?)
        })
    }

    fn recover(
        &self,
        reference: &str,
        at: DateTime<Utc>,
        resend: Option<&str>,
        now: DateTime<Utc>,
    ) -> Answer<Recovered> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        let resend = resend.map(str::to_owned);
        Box::pin(async move {
            Ok(inner
                .recover(&reference, at, resend.as_deref(), now)
                .await?)
        })
    }

    fn refund(
        &self,
        reference: &str,
        amount: i64,
        currency: &str,
        _now: DateTime<Utc>,
        key: &str,
    ) -> Answer<RefundResult> {
        let (inner, reference, key) = (self.inner.clone(), reference.to_owned(), key.to_owned());
        let amount = units::to_stripe(amount, currency);
        Box::pin(async move {
            let id = Inner::intent_id(&reference)?;
            let amount = amount.map_err(|e| ProcessorError::Refused(e.0))?;
            let form = vec![
                pair("payment_intent", id),
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
            let id = Inner::intent_id(&reference)?;
            let query = vec![pair("payment_intent", id), pair("limit", 100)];
            let list = inner.get("refunds", query).await?;
            Ok(items(&list)
                .iter()
                .filter(|r| r["payment_intent"].as_str() == Some(id))
                .map(|r| AppliedRefund {
                    reference: r["metadata"]["payd_refund_id"]
                        .as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| str_of(r, "id")),
                    processor_reference: r["id"].as_str().map(str::to_owned),
                    amount: units::from_stripe(
                        r["amount"].as_i64().unwrap_or(0),
                        r["currency"].as_str().unwrap_or_default(),
                    ),
                    status: refund_status(r),
                })
                .collect())
        })
    }

    /// `GET /v1/disputes?payment_intent=…`: every dispute of the PaymentIntent's charges.
    fn cases(&self, reference: &str) -> Answer<Vec<Value>> {
        let (inner, reference) = (self.inner.clone(), reference.to_owned());
        Box::pin(async move {
            let id = Inner::intent_id(&reference)?;
            let query = vec![pair("payment_intent", id), pair("limit", 100)];
            Ok(items(&inner.get("disputes", query).await?))
        })
    }

    /// `POST /v1/disputes/{id}/close` (docs.stripe.com/api/disputes/close): the dispute is
    /// lost, irreversibly.
    fn close_dispute(&self, case: &str, key: &str) -> Answer<()> {
        let (inner, case, key) = (self.inner.clone(), case.to_owned(), key.to_owned());
        Box::pin(async move {
            inner
                .post(
                    &format!("disputes/{}/close", dispute_id(&case)?),
                    &key,
                    vec![],
                )
                .await?;
            Ok(())
        })
    }

    /// `POST /v1/disputes/{id}` with `evidence[uncategorized_text]` and `submit=true`
    /// (docs.stripe.com/api/disputes/update): the evidence goes to the bank at once, and
    /// Stripe takes no more after it.
    fn submit_dispute(&self, case: &str, explanation: &str, key: &str) -> Answer<()> {
        let (inner, case, key) = (self.inner.clone(), case.to_owned(), key.to_owned());
        let form = vec![
            pair("evidence[uncategorized_text]", explanation),
            pair("submit", "true"),
        ];
        Box::pin(async move {
            inner
                .post(&format!("disputes/{}", dispute_id(&case)?), &key, form)
                .await?;
            Ok(())
        })
    }

    /// `GET /v1/events?created[gte]=…&types[]=…`: the events payd follows, newest first, read
    /// back page by page (at most `EVENT_PAGES` of 100; beyond, the oldest are skipped and
    /// logged) and handed over oldest first.
    fn events_since(&self, since: i64) -> Answer<(Vec<Value>, i64)> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let mut events: Vec<Value> = Vec::new();
            let mut after: Option<String> = None;
            let mut complete = false;
            for _ in 0..EVENT_PAGES {
                let mut query = vec![pair("limit", 100), pair("created[gte]", since)];
                query.extend(FOLLOWED_EVENTS.iter().map(|t| pair("types[]", t)));
                if let Some(last) = &after {
                    query.push(pair("starting_after", last));
                }
                let page = inner.get("events", query).await?;
                let data = items(&page);
                after = data
                    .last()
                    .and_then(|e| e["id"].as_str())
                    .map(str::to_owned);
                events.extend(data);
                if page["has_more"] != Value::Bool(true) || after.is_none() {
                    complete = true;
                    break;
                }
            }
            if !complete {
                tracing::warn!(account = %inner.account_id, since, read = events.len(),
                    "more Stripe events than one catch-up reads: the oldest are skipped");
            }
            let until = events
                .iter()
                .filter_map(|e| e["created"].as_i64())
                .max()
                .unwrap_or(since);
            events.reverse();
            Ok((events, until))
        })
    }

    /// A PaymentIntent made for `payment_id` that its payment does not hold: canceled if it
    /// waits for capture, refunded in full (`metadata[payd_orphan_of]`) if it succeeded, each
    /// under a key of its own so that asking again does nothing twice.
    fn release(&self, reference: &str, payment_id: &str) -> Answer<Option<&'static str>> {
        let (inner, reference, payment_id) = (
            self.inner.clone(),
            reference.to_owned(),
            payment_id.to_owned(),
        );
        Box::pin(async move {
            let id = Inner::intent_id(&reference)?;
            let pi = inner.payment_intent(id).await?;
            if pi["metadata"]["payd_payment_id"].as_str() != Some(payment_id.as_str()) {
                return Ok(None);
            }
            let key = format!("{id}.orphan");
            match pi["status"].as_str() {
                Some("requires_capture") => {
                    inner
                        .post(&format!("payment_intents/{id}/cancel"), &key, vec![])
                        .await?;
                    Ok(Some("canceled"))
                }
                Some("succeeded") => {
                    let form = vec![
                        pair("payment_intent", id),
                        pair("metadata[payd_orphan_of]", &payment_id),
                    ];
                    inner.post("refunds", &key, form).await?;
                    Ok(Some("refunded"))
                }
                _ => Ok(None),
            }
        })
    }

    /// The card of a PaymentMethod Stripe.js made: `GET /v1/payment_methods/{id}`
    /// (docs.stripe.com/api/payment_methods/retrieve); for a card token, the PaymentMethod made
    /// of it, `POST /v1/payment_methods` with `card[token]`
    /// (docs.stripe.com/api/payment_methods/create). One that is not a card's, or that the
    /// account does not hold (404), is refused.
    fn method_card(&self, method: &str) -> Answer<MethodCard> {
        let (inner, method) = (self.inner.clone(), method.to_owned());
        Box::pin(async move {
            let pm = if method.starts_with("tok_") {
                let form = vec![pair("type", "card"), pair("card[token]", &method)];
                inner
                    .post("payment_methods", &format!("{method}.pm"), form)
                    .await?
            } else {
                inner
                    .get(&format!("payment_methods/{method}"), vec![])
                    .await?
            };
            // A test PaymentMethod (`pm_card_visa`) is charged by its own name.
            let id = match pm["id"].as_str() {
                Some(made) if method.starts_with("tok_") => made.to_owned(),
                _ => method.clone(),
            };
            let card = &pm["card"];
            let (Some(last4), Some(exp_month), Some(exp_year)) = (
                card["last4"].as_str(),
                card["exp_month"].as_u64(),
                card["exp_year"].as_u64(),
            ) else {
                return Err(ProcessorError::Refused(format!(
                    "{method} is not a card's PaymentMethod"
                )));
            };
            Ok(MethodCard {
                method: id,
                brand: brand_of(card["brand"].as_str().unwrap_or_default()),
                last4: last4.to_owned(),
                exp_month: exp_month as u32,
                exp_year: exp_year as u32,
                // localstripe gives none: the PaymentMethod itself stands for its card.
                fingerprint: card["fingerprint"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| str_of(&pm, "id")),
            })
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
