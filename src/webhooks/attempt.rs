//! One attempt: the event posted once to its endpoint, signed afresh with the secrets live
//! now, over the delivery actors' client (no redirects, bounded by the timeout, through the
//! outbound guard), and the attempt's row.

use std::{
    sync::Arc,
    time::{Duration as StdDuration, Instant},
};

use chrono::{DateTime, Utc};
use payd_entity::{delivery, delivery_attempt, event, webhook_endpoint};
use sea_orm::ActiveValue::Set;

use super::{
    policy::{self, Answer},
    signer,
};
use crate::stored::Json;
use crate::{
    ids::new_id,
    outbound::{self, Blocked, Policy},
    sealed::{Keyring, SealError},
};

/// The most of a receiver's answer that is kept.
const BODY_LIMIT: usize = 16 * 1024;

/// What one HTTP attempt produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub answer: Answer,
    pub request_headers: Vec<(String, String)>,
    pub response_body: Option<String>,
    pub duration_ms: i64,
}

/// The secrets a signature is made with now, opened: the current one, and the previous one
/// while its 24 hours after a rotation last.
pub fn live_secrets(
    endpoint: &webhook_endpoint::Model,
    now: DateTime<Utc>,
    keyring: &Keyring,
) -> Result<Vec<String>, SealError> {
    let mut secrets = vec![keyring.open(&endpoint.secret)?];
    if let (Some(prev), Some(until)) = (
        &endpoint.previous_secret,
        endpoint.previous_secret_expires_at,
    ) {
        if now < until {
            secrets.push(keyring.open(prev)?);
        }
    }
    Ok(secrets)
}

/// Posts the event once: signed afresh, no redirects followed, bounded by the timeout.
pub async fn attempt(
    client: &awc::Client,
    endpoint: &webhook_endpoint::Model,
    event: &event::Model,
    now: DateTime<Utc>,
    timeout: StdDuration,
    keyring: &Keyring,
) -> Outcome {
    // The signature's timestamp is the wall clock: receivers check it against theirs.
    let timestamp = crate::clock::wall_now().timestamp();
    let secrets = match live_secrets(endpoint, now, keyring) {
        Ok(secrets) => secrets,
        // Not sent unsigned: an operator's missing key is fixed, and the retry signs.
        Err(e) => {
            tracing::error!(endpoint = %endpoint.id, error = %e, "a signing secret cannot be opened");
            return Outcome {
                answer: Answer::Network,
                request_headers: Vec::new(),
                response_body: Some(format!("not sent: {e}")),
                duration_ms: 0,
            };
        }
    };
    let headers = signer::request_headers(
        secrets.iter().map(String::as_str),
        &event.id,
        timestamp,
        event.payload.as_bytes(),
        concat!("payd-webhooks/", env!("CARGO_PKG_VERSION")),
    );
    let mut req = client.post(&endpoint.url).timeout(timeout);
    for (name, value) in &headers {
        req = req.insert_header((name.as_str(), value.as_str()));
    }
    let started = Instant::now();
    let sent = req.send_body(event.payload.clone()).await;
    let (answer, body) = match sent {
        Ok(mut res) => {
            let code = res.status().as_u16();
            let retry_after = res
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            let body = match tokio::time::timeout(timeout, res.body().limit(BODY_LIMIT * 4)).await {
                Ok(Ok(bytes)) => {
                    let cut = &bytes[..bytes.len().min(BODY_LIMIT)];
                    Some(String::from_utf8_lossy(cut).into_owned())
                }
                _ => None,
            };
            (Answer::Status { code, retry_after }, body)
        }
        Err(awc::error::SendRequestError::Timeout) => (Answer::Timeout, None),
        Err(e) => match outbound::blocked(&e) {
            Some(ip) => (Answer::Blocked, Some(Blocked(ip).to_string())),
            None => (Answer::Network, Some(e.to_string())),
        },
    };
    let duration = started.elapsed();
    metrics::histogram!("payd_webhook_attempt_seconds").record(duration.as_secs_f64());
    Outcome {
        answer,
        request_headers: headers,
        response_body: body,
        duration_ms: duration.as_millis() as i64,
    }
}

thread_local! {
    /// The delivery actors' client, one per arbiter thread and policy (an awc client cannot
    /// move between threads, and an actor is built on the caller's thread before it moves to
    /// its arbiter). No connection limit of its own: each merchant's actor bounds its requests
    /// in flight. Its connections go through the outbound guard.
    static DELIVERY_CLIENT: std::cell::RefCell<Option<(Arc<Policy>, awc::Client)>> =
        const { std::cell::RefCell::new(None) };
}

pub(super) fn delivery_client(timeout: StdDuration, policy: &Arc<Policy>) -> awc::Client {
    DELIVERY_CLIENT.with(|c| {
        let mut cached = c.borrow_mut();
        match &*cached {
            Some((for_policy, client)) if Arc::ptr_eq(for_policy, policy) => client.clone(),
            _ => {
                let client = outbound::client(policy)
                    .disable_redirects()
                    .timeout(timeout)
                    .finish();
                *cached = Some((policy.clone(), client.clone()));
                client
            }
        }
    })
}

/// The record of one attempt, ready to insert (automatic ones are inserted in batches by
/// `write`, manual retries one by one).
pub fn attempt_row(
    d: &delivery::Model,
    number: i32,
    trigger: payd_model::webhooks::AttemptTrigger,
    outcome: &Outcome,
    next_attempt_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> delivery_attempt::ActiveModel {
    let headers = outcome.request_headers.iter().cloned().collect();
    delivery_attempt::ActiveModel {
        id: Set(new_id("dla")),
        delivery_id: Set(d.id.clone()),
        event_id: Set(d.event_id.to_string()),
        number: Set(number),
        trigger: Set(trigger),
        request_headers: Set(Json(headers)),
        response_status: Set(match outcome.answer {
            Answer::Status { code, .. } => Some(i32::from(code)),
            _ => None,
        }),
        response_body: Set(outcome.response_body.clone()),
        error_kind: Set(policy::error_kind(outcome.answer)),
        duration_ms: Set(outcome.duration_ms),
        next_attempt_at: Set(next_attempt_at),
        created_at: Set(now),
    }
}
