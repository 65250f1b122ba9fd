//! The operation a payment sends to its processor, recorded (its intent) before the request
//! goes out: intent → effect → outcome. Refunds have their own row, committed `pending` the
//! same way (`actor::refund`).
//!
//! Invariant: a processor that keeps state never hears of an authorization, a challenge's
//! answer, a capture or a void that payd has not recorded. The intent is committed on the
//! payment row with the request's idempotency key; the outcome is committed with the intent
//! cleared. An intent whose outcome never got committed (a crash, a timeout, a failed commit)
//! keeps the payment's settle job, which reconciles it: an authorization by a sync of its
//! reference; a challenge's answer, a capture or a void by sending the same request with the
//! same key again (the processor answers its first answer without a second effect). Until
//! then every command on the payment reconciles it first.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::machine::Status;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Intent {
    /// Attempt `attempt_id` asks `account` to authorize, under `reference` (its idempotency
    /// key, and what a sync asks about).
    Authorize {
        attempt_id: String,
        account: String,
        reference: String,
        at: DateTime<Utc>,
        /// What the processor needs to send the authorization again under its key, once its
        /// answer was lost (`AuthResult::resend`): set with the outcome, not before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resend: Option<String>,
    },
    /// The buyer's answer to the authorization's challenge (3-D Secure), passed on to the
    /// processor (whose key for it is the authorization's reference and `challenge`).
    Challenge { approve: bool },
    /// A capture of `amount` of the payment's authorization.
    Capture {
        key: String,
        amount: i64,
        final_capture: bool,
    },
    /// A void of what the processor holds, after which the payment is `to` (`cancelled`,
    /// `partially_captured`, `cancelled_post_capture` or `expired`): decided before the
    /// request, so that a void the processor made is recorded even once the void window or
    /// the authorization's life has passed.
    Void {
        key: String,
        to: String,
        /// Asked for by the authorization's lapse, not by a cancel.
        expiry: bool,
    },
}

impl Intent {
    /// A void that leaves the payment `to`, asked for by a cancel or by the authorization's
    /// lapse (`expiry`).
    pub fn void(key: String, to: Status, expiry: bool) -> Self {
        Intent::Void {
            key,
            to: to.as_str().to_owned(),
            expiry,
        }
    }

    /// `authorize`, `challenge`, `capture` or `void`.
    pub fn op(&self) -> &'static str {
        match self {
            Intent::Authorize { .. } => "authorize",
            Intent::Challenge { .. } => "challenge",
            Intent::Capture { .. } => "capture",
            Intent::Void { .. } => "void",
        }
    }

    /// An authorization's intent with what its processor needs to send it again, when its
    /// answer was lost (the processor's `AuthResult::resend`).
    pub fn resending(self, resend: Option<String>) -> Self {
        match self {
            Intent::Authorize {
                attempt_id,
                account,
                reference,
                at,
                ..
            } => Intent::Authorize {
                attempt_id,
                account,
                reference,
                at,
                resend,
            },
            other => other,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}
