//! What payd keeps of a card (never its number or CVC): its brand, the last four digits,
//! expiry, a keyed fingerprint, how the sandbox treats it, and where a processor keeps it.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Brand {
    Visa,
    Mastercard,
    Amex,
    Discover,
    Unknown,
}

/// How the sandbox processors treat a card (DESIGN §5 test cards). Kept with sandbox
/// payments only, so that later operations (sync, refunds) behave as the card says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestBehaviour {
    Approve,
    Decline,
    InsufficientFunds,
    StolenCard,
    Challenge,
    PartialAuthorization,
    Async,
    Timeout,
    Review,
    DisputeAfterCapture,
    ChargesDeclined,
    RefundFails,
    /// payd's own addition: the processor later reports another amount (→ `conflicted`).
    SyncMismatch,
}

/// What payd keeps of a card: never the number or the CVC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCard {
    pub brand: Brand,
    pub last4: String,
    pub exp_month: u32,
    pub exp_year: u32,
    /// HMAC of the merchant and the number under the server's pepper: at one merchant, equal
    /// cards have equal fingerprints; at two merchants, never.
    pub fingerprint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_name: Option<String>,
    /// Sandbox payments only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_behaviour: Option<TestBehaviour>,
    /// Where a processor that keeps cards (Stripe) keeps this one, once saved there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<ProcessorToken>,
}

/// A card saved at a processor: its customer and payment method there, valid at one
/// processor account only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessorToken {
    /// payd's processor account id.
    pub account: String,
    /// The processor's customer the method is attached to; none for a method made in the
    /// buyer's browser and not saved (Stripe.js's).
    #[serde(default)]
    pub customer: Option<String>,
    pub method: String,
}

impl StoredCard {
    /// The card's token at this processor account, if it was saved there.
    pub fn token_at(&self, account: &str) -> Option<&ProcessorToken> {
        self.token.as_ref().filter(|t| t.account == account)
    }
}
