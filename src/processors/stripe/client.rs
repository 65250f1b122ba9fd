//! One request to Stripe, the retries Stripe asks for, and what its answer means.
//!
//! Every rule here follows Stripe's documentation of its own errors:
//! - A 2xx is done; 402 is a card error; 401 and 403 refuse the key; any other 4xx refuses the
//!   request, which did nothing (docs.stripe.com/error-low-level).
//! - A 5xx, a connection that breaks after the request was written, a body that cannot be
//!   read, or no answer in time leave the result *unknown*: the request may have been carried
//!   out (docs.stripe.com/error-low-level, "Server errors"). An unknown result is never read as
//!   a refusal: the caller keeps the operation open and asks again with the same
//!   `Idempotency-Key`, which Stripe answers with its first answer for 24 hours
//!   (docs.stripe.com/idempotency).
//! - 429 (too many requests, or `lock_timeout` on an object another request holds) did
//!   nothing and may be sent again after a pause; 409 on an idempotent request says a request
//!   under the same key is still running (docs.stripe.com/rate-limits,
//!   docs.stripe.com/idempotency). Both are retried with jittered exponential backoff inside
//!   the request's deadline, as Stripe's own libraries do; `Stripe-Should-Retry: false`
//!   forbids a retry and `true` asks for one (docs.stripe.com/error-low-level, "Retries").
//! - A GET changes nothing and is retried on a 5xx; a POST's 5xx is left to the caller's
//!   reconciliation (asked again there under the same key).
//! - Only failures to reach Stripe (no connection, no answer) count toward the circuit
//!   breaker: a Stripe that answers, even with an error, is reachable.

use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::Value;

use super::{count, Form, Inner, API_VERSION};
use crate::outbound::{self, Blocked};
use crate::processors::ProcessorError;

/// How many times a request is sent at most: the first time and two retries (Stripe's
/// libraries' default of `maxNetworkRetries`).
const MAX_TRIES: u32 = 3;
/// The first retry's pause; each next one doubles it, up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Why Stripe did not do what it was asked, or why payd cannot tell whether it did.
#[derive(Debug, Clone)]
pub(super) enum Failure {
    /// A card error (402): the card was declined. Stripe names the PaymentIntent it made for
    /// the attempt (`error.payment_intent`), when it made one.
    Card {
        code: String,
        message: String,
        intent: Option<String>,
    },
    /// The secret key was refused (401, 403).
    Key,
    /// Another 4xx: the request was refused and did nothing.
    Refused(String),
    /// Refused for the account's configuration (card numbers from an account Stripe did not
    /// approve for raw card data): did nothing.
    Configuration(String),
    /// 429: Stripe did nothing now; the same request may go again later.
    Busy(String),
    /// The request never left payd (no connection, the outbound guard, an open circuit).
    Unreached(String),
    /// No answer within the request's deadline: the result is unknown.
    Timeout,
    /// The request was sent and its result is unknown (a 5xx, a broken connection, an
    /// unreadable body, a request under the same key still running).
    Unknown(String),
}

impl Failure {
    /// Whether Stripe may have carried the request out.
    pub(super) fn maybe_done(&self) -> bool {
        matches!(self, Failure::Timeout | Failure::Unknown(_))
    }

    /// Its `outcome` in `payd_processor_requests_total`.
    fn label(&self) -> &'static str {
        match self {
            Failure::Card { .. }
            | Failure::Key
            | Failure::Refused(_)
            | Failure::Configuration(_) => "refused",
            Failure::Busy(_) => "busy",
            Failure::Unreached(_) => "unreached",
            Failure::Timeout => "timeout",
            Failure::Unknown(_) => "unknown",
        }
    }
}

impl From<Failure> for ProcessorError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Card { code, message, .. } => {
                ProcessorError::Refused(format!("{code}: {message}"))
            }
            Failure::Key => {
                ProcessorError::Refused("Stripe refused the account's secret key".into())
            }
            Failure::Refused(why) | Failure::Configuration(why) => ProcessorError::Refused(why),
            Failure::Busy(why) | Failure::Unreached(why) => ProcessorError::Unavailable(why),
            Failure::Timeout => ProcessorError::Timeout,
            Failure::Unknown(why) => ProcessorError::Unknown(why),
        }
    }
}

/// One answer, and what Stripe said of sending the request again.
struct Sent {
    outcome: Result<Value, Failure>,
    should_retry: Option<bool>,
}

impl Inner {
    /// A request to Stripe: a POST (form-encoded, under its idempotency key) when `key` is
    /// set, a GET (with `form` as its query) when not; retried as Stripe asks, all within the
    /// account's timeout.
    pub(super) async fn call(
        &self,
        path: &str,
        key: Option<&str>,
        form: &Form,
    ) -> Result<Value, Failure> {
        let deadline = Instant::now() + Duration::from_millis(self.config.timeout_ms);
        let mut tries = 0;
        loop {
            tries += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let sent = self.send(path, key, form, left).await;
            let pause = backoff(tries);
            let again = tries < MAX_TRIES
                && retry(&sent, key.is_none())
                && Instant::now() + pause < deadline;
            if !again {
                return sent.outcome;
            }
            count("retried");
            actix_web::rt::time::sleep(pause).await;
        }
    }

    /// Sends one request, with `left` to answer.
    async fn send(&self, path: &str, key: Option<&str>, form: &Form, left: Duration) -> Sent {
        if !self.breaker.allow() {
            count("circuit_open");
            return Sent {
                outcome: Err(Failure::Unreached("circuit open".into())),
                should_retry: Some(false),
            };
        }
        let client = outbound::client(&self.outbound)
            .timeout(left.max(Duration::from_millis(1)))
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
            Some(key) => {
                request
                    .insert_header(("idempotency-key", key))
                    .send_form(form)
                    .await
            }
            None => match request.query(form) {
                Ok(request) => request.send().await,
                Err(e) => {
                    return Sent {
                        outcome: Err(Failure::Refused(e.to_string())),
                        should_retry: Some(false),
                    }
                }
            },
        };
        let mut should_retry = None;
        let outcome = match sent {
            Err(awc::error::SendRequestError::Timeout) => Err(Failure::Timeout),
            // Nothing was written: the connection was never made (or the guard refused it).
            Err(e @ awc::error::SendRequestError::Connect(_)) => {
                Err(Failure::Unreached(match outbound::blocked(&e) {
                    Some(ip) => Blocked(ip).to_string(),
                    None => e.to_string(),
                }))
            }
            Err(
                e @ (awc::error::SendRequestError::Url(_) | awc::error::SendRequestError::Http(_)),
            ) => Err(Failure::Unreached(e.to_string())),
            // Written, at least in part: Stripe may have acted on it.
            Err(e) => Err(Failure::Unknown(format!("the connection failed: {e}"))),
            Ok(mut res) => {
                should_retry = res
                    .headers()
                    .get("stripe-should-retry")
                    .and_then(|v| v.to_str().ok())
                    .map(|v| v.eq_ignore_ascii_case("true"));
                match res.body().limit(4 << 20).await {
                    Err(e) => Err(Failure::Unknown(format!("an unreadable answer: {e}"))),
                    Ok(bytes) => outcome(
                        res.status().as_u16(),
                        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                    ),
                }
            }
        };
        self.record(path, &outcome);
        Sent {
            outcome,
            should_retry,
        }
    }

    /// What one answer tells the operator: an error logged where the account's settings are
    /// at fault, the request counted by outcome, and the circuit breaker told whether Stripe
    /// was reached (a Stripe that answers, even with an error, is reachable).
    fn record(&self, path: &str, outcome: &Result<Value, Failure>) {
        match outcome {
            Err(Failure::Key) => tracing::error!(
                account = %self.account_id,
                "Stripe refused the processor account's secret key"
            ),
            Err(Failure::Refused(why)) if why.contains("idempotency_error") => tracing::error!(
                account = %self.account_id, path, error = %why,
                "Stripe refused an idempotency key sent again with other parameters"
            ),
            _ => {}
        }
        count(match outcome {
            Ok(_) => "ok",
            Err(f) => f.label(),
        });
        match outcome {
            Err(Failure::Unreached(_) | Failure::Timeout) => self.breaker.failure(),
            _ => self.breaker.success(),
        }
    }
}

/// Whether a request is sent again after this answer.
fn retry(sent: &Sent, get: bool) -> bool {
    if sent.should_retry == Some(false) {
        return false;
    }
    match &sent.outcome {
        Ok(_) => false,
        Err(Failure::Busy(_) | Failure::Unreached(_)) => true,
        Err(Failure::Unknown(why)) if why.starts_with(IN_USE) => true,
        Err(Failure::Unknown(_)) => get || sent.should_retry == Some(true),
        Err(_) => false,
    }
}

/// The pause before the `tries`-th retry: exponential, capped, and jittered between half and
/// all of it so that many requests held back together do not come back together.
fn backoff(tries: u32) -> Duration {
    let full = FIRST_BACKOFF
        .saturating_mul(1 << tries.saturating_sub(1).min(8))
        .min(MAX_BACKOFF);
    full.mul_f64(rand::rng().random_range(0.5..=1.0))
}

/// How an unknown result of a request whose key is still in use at Stripe begins.
const IN_USE: &str = "a request under the same key is still running";

/// What Stripe's answer means.
pub(super) fn outcome(status: u16, body: Value) -> Result<Value, Failure> {
    let error = &body["error"];
    let message = error["message"].as_str().unwrap_or("").to_owned();
    let code = error["code"].as_str().unwrap_or("no code");
    match status {
        200..=299 if body.is_object() => Ok(body),
        200..=299 => Err(Failure::Unknown(
            "an answer that is not a JSON object".into(),
        )),
        401 | 403 => Err(Failure::Key),
        // A card error. localstripe says `type: invalid_request_error` where Stripe says
        // `card_error`: the status decides.
        402 => Err(Failure::Card {
            code: super::decline_code(error),
            message: if message.is_empty() {
                "the card was declined".into()
            } else {
                message
            },
            intent: error["payment_intent"]["id"].as_str().map(str::to_owned),
        }),
        409 => Err(Failure::Unknown(format!("{IN_USE}: {message}"))),
        429 => Err(Failure::Busy(format!(
            "Stripe answered 429 ({code}): {message}"
        ))),
        500..=599 => Err(Failure::Unknown(format!(
            "Stripe answered {status}: {message}"
        ))),
        _ => Err(Failure::Refused(format!(
            "Stripe answered {status} ({}): {message}",
            error["type"]
                .as_str()
                .filter(|t| *t == "idempotency_error")
                .unwrap_or(code)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(outcome: Result<Value, Failure>, should_retry: Option<bool>) -> Sent {
        Sent {
            outcome,
            should_retry,
        }
    }

    #[test]
    fn only_a_definite_answer_is_a_refusal() {
        let json = |v: &str| serde_json::from_str::<Value>(v).unwrap();
        assert!(outcome(200, json("{}")).is_ok());
        assert!(matches!(
            outcome(200, Value::Null),
            Err(Failure::Unknown(_))
        ));
        assert!(matches!(outcome(500, Value::Null), Err(f) if f.maybe_done()));
        assert!(matches!(outcome(503, Value::Null), Err(f) if f.maybe_done()));
        assert!(matches!(outcome(409, Value::Null), Err(f) if f.maybe_done()));
        assert!(matches!(outcome(429, Value::Null), Err(Failure::Busy(_))));
        assert!(matches!(
            outcome(400, Value::Null),
            Err(Failure::Refused(_))
        ));
        let declined = json(
            r#"{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","payment_intent":{"id":"pi_1"}}}"#,
        );
        match outcome(402, declined) {
            Err(Failure::Card { code, intent, .. }) => {
                assert_eq!(
                    (code.as_str(), intent.as_deref()),
                    ("insufficient_funds", Some("pi_1"))
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn retries_follow_stripe_should_retry_and_the_method() {
        let busy = || Err(Failure::Busy("429".into()));
        let server = || Err(Failure::Unknown("Stripe answered 500".into()));
        let in_use = || Err(Failure::Unknown(format!("{IN_USE}: x")));
        assert!(retry(&sent(busy(), None), false));
        assert!(
            !retry(&sent(busy(), Some(false)), false),
            "Stripe-Should-Retry: false"
        );
        assert!(retry(&sent(in_use(), None), false));
        assert!(
            !retry(&sent(server(), None), false),
            "a POST's 500 is reconciled"
        );
        assert!(retry(&sent(server(), Some(true)), false));
        assert!(
            retry(&sent(server(), None), true),
            "a GET's 500 is asked again"
        );
        assert!(
            !retry(&sent(Err(Failure::Timeout), None), true),
            "no time left"
        );
        assert!(!retry(
            &sent(Err(Failure::Refused("400".into())), None),
            true
        ));
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        for tries in 1..12 {
            let pause = backoff(tries);
            assert!(
                pause <= MAX_BACKOFF && pause >= FIRST_BACKOFF / 2,
                "{pause:?}"
            );
        }
        assert!(backoff(2) >= FIRST_BACKOFF, "doubles: {:?}", backoff(2));
    }
}
