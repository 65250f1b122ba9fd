//! Processors: the trait every payment processor implements, and the sandbox processors.
//!
//! The payment actor calls a processor between asking the machine whether a command is
//! allowed and handing the answer back to the machine; the processor never touches payd's
//! tables.

pub mod card;
pub mod sandbox;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;

use crate::payments::machine::{Authorization, ProcessorView};
pub use card::{CardInput, StoredCard};

/// An authorization request.
#[derive(Debug, Clone)]
pub struct AuthRequest {
    pub payment_id: String,
    pub amount: i64,
    pub currency: String,
    /// Capture at once (automatic capture).
    pub capture: bool,
    pub partial_allowed: bool,
    pub card: StoredCard,
    pub now: DateTime<Utc>,
}

/// The processor's answer to an authorization.
#[derive(Debug, Clone)]
pub struct AuthResult {
    pub reference: Option<String>,
    pub outcome: Authorization,
    /// Code and message of a decline.
    pub error: Option<(String, String)>,
}

/// Where a refund stands at the processor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundStatus {
    Succeeded,
    Pending,
    Failed(String),
}

#[derive(Debug, Clone)]
pub struct RefundResult {
    pub reference: String,
    pub status: RefundStatus,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ProcessorError {
    #[error("the processor could not be reached: {0}")]
    Unavailable(String),
    #[error("the processor refused: {0}")]
    Refused(String),
}

pub trait Processor: Send + Sync + 'static {
    /// Whether the processor accepts this card for later charges (saved methods, mandates).
    fn can_save(&self, _card: &StoredCard) -> bool {
        true
    }

    fn authorize(&self, req: AuthRequest)
        -> BoxFuture<'static, Result<AuthResult, ProcessorError>>;
    /// The buyer finished (or failed) the challenge of a `ChallengeRequired` authorization.
    fn complete_challenge(
        &self,
        reference: &str,
        approved: bool,
        now: DateTime<Utc>,
    ) -> BoxFuture<'static, Result<AuthResult, ProcessorError>>;
    fn capture(
        &self,
        reference: &str,
        amount: i64,
    ) -> BoxFuture<'static, Result<(), ProcessorError>>;
    fn void(&self, reference: &str) -> BoxFuture<'static, Result<(), ProcessorError>>;
    /// What the processor holds for this reference now.
    fn sync(
        &self,
        reference: &str,
        now: DateTime<Utc>,
    ) -> BoxFuture<'static, Result<ProcessorView, ProcessorError>>;
    /// Refunds `amount` of the payment behind `reference`.
    fn refund(
        &self,
        reference: &str,
        amount: i64,
        now: DateTime<Utc>,
    ) -> BoxFuture<'static, Result<RefundResult, ProcessorError>>;
    /// Where the refund behind `refund_reference` stands now.
    fn sync_refund(
        &self,
        refund_reference: &str,
        now: DateTime<Utc>,
    ) -> BoxFuture<'static, Result<RefundResult, ProcessorError>>;
}
