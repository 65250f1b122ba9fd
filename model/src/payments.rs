//! What a payment's row holds of closed sets; its machine is `payd::payments::machine`.

text_enum! {
    // Not here: the spec's `partially_captured_and_processing`. No capture is pending at a
    // processor yet (a capture is answered or refused), so nothing could reach it; it comes
    // with pending captures (docs/features.md).
    pub enum Status {
        RequiresPaymentMethod = "requires_payment_method",
        RequiresConfirmation = "requires_confirmation",
        RequiresCustomerAction = "requires_customer_action",
        RequiresMerchantAction = "requires_merchant_action",
        Processing = "processing",
        RequiresCapture = "requires_capture",
        PartiallyAuthorizedAndRequiresCapture = "partially_authorized_and_requires_capture",
        PartiallyCaptured = "partially_captured",
        PartiallyCapturedAndCapturable = "partially_captured_and_capturable",
        Succeeded = "succeeded",
        Declined = "declined",
        Failed = "failed",
        Cancelled = "cancelled",
        CancelledPostCapture = "cancelled_post_capture",
        Expired = "expired",
        Conflicted = "conflicted",
    }
}

impl Status {
    /// No command moves a payment out of these (a sync may still flag a contradiction).
    /// `succeeded` and `partially_captured` are settled but not terminal: inside the void
    /// window they can still be cancelled (`cancelled_post_capture`).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Failed
                | Status::Cancelled
                | Status::CancelledPostCapture
                | Status::Expired
                | Status::Conflicted
        )
    }

    /// The event the spec names for this status, if any.
    pub fn event(self) -> Option<&'static str> {
        Some(match self {
            Status::Succeeded => "payment_succeeded",
            Status::Failed | Status::Declined => "payment_failed",
            Status::Processing => "payment_processing",
            Status::RequiresCapture => "payment_authorized",
            Status::PartiallyAuthorizedAndRequiresCapture => "payment_partially_authorized",
            Status::PartiallyCaptured | Status::PartiallyCapturedAndCapturable => {
                "payment_captured"
            }
            Status::Cancelled => "payment_cancelled",
            Status::CancelledPostCapture => "payment_cancelled_post_capture",
            Status::Expired => "payment_expired",
            Status::RequiresCustomerAction
            | Status::RequiresMerchantAction
            | Status::Conflicted => "action_required",
            Status::RequiresPaymentMethod | Status::RequiresConfirmation => return None,
        })
    }

    /// Statuses in which the payment can still be edited and confirmed.
    pub fn is_unconfirmed(self) -> bool {
        matches!(
            self,
            Status::RequiresPaymentMethod | Status::RequiresConfirmation | Status::Declined
        )
    }

    /// Statuses holding an authorization that can still be captured.
    pub fn is_capturable(self) -> bool {
        matches!(
            self,
            Status::RequiresCapture
                | Status::PartiallyAuthorizedAndRequiresCapture
                | Status::PartiallyCapturedAndCapturable
        )
    }
}

text_enum! {
    /// Whether an approved authorization is captured at once or waits for the merchant.
    pub enum CaptureMethod {
        Automatic = "automatic",
        Manual = "manual",
    }
}

impl CaptureMethod {
    /// `manual` when the merchant captures, else `automatic`.
    pub fn of(manual: bool) -> Self {
        match manual {
            true => CaptureMethod::Manual,
            false => CaptureMethod::Automatic,
        }
    }
}

text_enum! {
    /// One confirm's attempt at a processor: `pending` while it is asked, then its answer.
    pub enum AttemptStatus {
        Pending = "pending",
        /// Approved for less than asked.
        PartiallyAuthorized = "partially_authorized",
        /// Approved and captured at once (automatic capture).
        Captured = "captured",
        /// Approved, waiting for the merchant's capture.
        Authorized = "authorized",
        Declined = "declined",
        ChallengeRequired = "challenge_required",
        ReviewRequired = "review_required",
    }
}

text_enum! {
    /// What a payment saves its card for (`setup_future_usage`): charges without the buyer
    /// (under a mandate) or with them.
    pub enum FutureUsage {
        OffSession = "off_session",
        OnSession = "on_session",
    }
}

text_enum! {
    /// What moved a payment to a status (its status history's `trigger`).
    pub enum Trigger {
        Create = "create",
        Confirm = "confirm",
        Challenge = "challenge",
        ChallengeRefused = "challenge_refused",
        Capture = "capture",
        CaptureRefused = "capture_refused",
        Cancel = "cancel",
        VoidRefused = "void_refused",
        Expire = "expire",
        Sync = "sync",
        Update = "update",
        Refund = "refund",
        RefundSettled = "refund_settled",
        RefundAdopted = "refund_adopted",
        Dispute = "dispute",
        Intent = "intent",
    }
}

/// A line as stored.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema, PartialEq, Eq)]
pub struct Line {
    pub line_id: String,
    pub product_id: Option<String>,
    pub price_id: Option<String>,
    pub name: String,
    pub quantity: i64,
    pub unit_amount: i64,
    pub tax_amount: i64,
    /// quantity × unit_amount + tax_amount
    pub amount: i64,
    /// Units refunded so far (pending and succeeded refunds).
    #[serde(default)]
    pub quantity_refunded: i64,
    /// Amount refunded from this line so far (pending and succeeded refunds).
    #[serde(default)]
    pub amount_refunded: i64,
}

/// The mandate a payment creates once its card is saved (stored with the payment).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct MandateRequest {
    pub single_use: bool,
    pub amount_limit: Option<i64>,
    pub currency: String,
    #[serde(default)]
    pub ends_at: Option<chrono::DateTime<chrono::Utc>>,
}

// Why the last attempt failed (no doc comment: the OpenAPI schema would carry it).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema, PartialEq, Eq)]
pub struct LastError {
    pub code: String,
    /// The processor's own words on the secret key's routes; a generic sentence for the code
    /// wherever a publishable key or a buyer's page reads it.
    pub message: String,
}

/// The operation a payment has sent (or is about to send) its processor.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Intent {
    /// Attempt `attempt_id` asks `account` to authorize, under `reference` (its idempotency
    /// key, and what a sync asks about).
    Authorize {
        attempt_id: String,
        account: String,
        reference: String,
        at: chrono::DateTime<chrono::Utc>,
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
        to: Status,
        /// Asked for by the authorization's lapse, not by a cancel.
        expiry: bool,
    },
}

impl Intent {
    /// A void that leaves the payment `to`, asked for by a cancel or by the authorization's
    /// lapse (`expiry`).
    pub fn void(key: String, to: Status, expiry: bool) -> Self {
        Intent::Void { key, to, expiry }
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
}

/// Why a processor was chosen for an attempt.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema, PartialEq, Eq)]
pub struct RoutingDecision {
    /// `rule`, `volume_split`, `default` or `fallback`.
    pub algorithm: String,
    /// The rule that matched, if any.
    pub rule: Option<String>,
    /// Processors considered, in the order they would be tried.
    pub candidates: Vec<String>,
    pub chosen: String,
    pub reason: String,
}

// A shop's routing rules in one mode (no doc comment: the OpenAPI schema would carry it).
#[derive(
    Debug, Clone, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema, PartialEq, Eq,
)]
#[serde(deny_unknown_fields)]
pub struct RoutingRules {
    /// Tried in order; the first rule whose conditions hold decides.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub name: String,
    #[serde(default)]
    pub conditions: Conditions,
    /// One entry routes everything to it; several split the volume by `percent` (they must
    /// add up to 100).
    pub processors: Vec<Split>,
}

#[derive(
    Debug, Clone, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema, PartialEq, Eq,
)]
#[serde(deny_unknown_fields)]
pub struct Conditions {
    /// Any of these currencies.
    #[serde(default)]
    pub currencies: Option<Vec<String>>,
    #[serde(default)]
    pub min_amount: Option<i64>,
    #[serde(default)]
    pub max_amount: Option<i64>,
    /// Any of these card brands.
    #[serde(default)]
    pub card_brands: Option<Vec<crate::cards::Brand>>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Split {
    pub processor: String,
    #[serde(default)]
    pub percent: Option<u8>,
}
