//! Processors: the trait every payment processor implements, the sandbox processors, and the
//! remote processor spoken to over HTTP (`docs/processor-protocol.md`).
//!
//! The payment actor calls a processor between asking the machine whether a command is
//! allowed and handing the answer back to the machine; the processor never touches payd's
//! tables.

pub mod card;
pub mod connect;
pub mod model;
pub mod remote;
pub mod sandbox;
pub mod sim;
pub mod stripe;

use chrono::{DateTime, Utc};
use futures_util::future::LocalBoxFuture;

pub use card::{CardInput, ProcessorToken, SecretCard, StoredCard};
use model::{Authorization, Brand, ProcessorView};

/// An authorization request.
#[derive(Debug, Clone)]
pub struct AuthRequest {
    /// payd's reference for this attempt: the idempotency key, and what a sync asks about
    /// when the answer was lost.
    pub reference: String,
    pub payment_id: String,
    pub amount: i64,
    pub currency: String,
    /// Capture at once (automatic capture).
    pub capture: bool,
    pub partial_allowed: bool,
    pub card: StoredCard,
    /// Present when the buyer just entered the card.
    pub secret: Option<SecretCard>,
    /// The payment saves the card for a customer (a processor that keeps cards itself, like
    /// Stripe, files it under its own customer).
    pub save: Option<SaveFor>,
    /// A merchant-initiated charge of a saved card (a mandate's).
    pub off_session: bool,
    /// Where a processor that runs 3-D Secure on its own page sends the buyer back (payd's
    /// `/checkout/{payment_id}/challenge/return`).
    pub return_url: String,
    pub now: DateTime<Utc>,
}

/// Where the buyer completes an authorization's 3-D Secure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// On payd's own challenge page (the sandbox's).
    Here,
    /// On the processor's page, at this URL (Stripe's `next_action.redirect_to_url`).
    At(String),
    /// On the processor's page, once the buyer asks for it on payd's page (an off-session
    /// charge the card's issuer wants the buyer to authenticate: Stripe's
    /// `authentication_required`). The buyer's "continue" is `complete_challenge` approved,
    /// which starts it; the challenge is then `At` the processor's page.
    Started,
}

/// The customer a card is saved for.
#[derive(Debug, Clone)]
pub struct SaveFor {
    /// payd's customer id.
    pub customer_id: String,
    /// The processor's customer this customer already has there (from a card saved before).
    pub known_customer: Option<String>,
    /// Saved for merchant-initiated charges (a mandate's, a subscription's), not only for the
    /// buyer's own later payments.
    pub off_session: bool,
}

/// The processor's answer to an authorization.
#[derive(Debug, Clone)]
pub struct AuthResult {
    pub reference: Option<String>,
    pub outcome: Authorization,
    /// Code and message of a decline.
    pub error: Option<(String, String)>,
    /// Where the processor keeps the card it saved (`AuthRequest::save`), if it keeps cards.
    pub token: Option<ProcessorToken>,
    /// For an authorization still `Pending` because its answer was lost: what the processor
    /// needs to send the same request again under the same idempotency key (`recover`).
    /// payd keeps it with the authorization's intent.
    pub resend: Option<String>,
    /// Until when the processor lets an approved authorization be captured, when it says
    /// (Stripe's `capture_before`); payd's own window otherwise.
    pub capture_before: Option<DateTime<Utc>>,
}

/// What a processor found of an authorization whose answer was lost (`Processor::recover`).
#[derive(Debug, Clone)]
pub struct Recovered {
    pub view: ProcessorView,
    /// The processor's own reference of the authorization, once found.
    pub reference: Option<String>,
    /// Code and message of a decline.
    pub error: Option<(String, String)>,
    /// Where the processor keeps the card the authorization saved, as `AuthResult::token`.
    pub token: Option<ProcessorToken>,
}

/// A card the processor holds and payd never saw (a PaymentMethod Stripe.js made), as the
/// processor describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodCard {
    /// The processor's payment method to charge (for a token, the one made of it).
    pub method: String,
    pub brand: Brand,
    pub last4: String,
    pub exp_month: u32,
    pub exp_year: u32,
    /// The processor's own fingerprint of the card's number.
    pub fingerprint: String,
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

/// A refund the processor applied to a payment, as it lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedRefund {
    /// payd's refund id for a refund payd asked for; the processor's own reference for one
    /// made elsewhere (its dashboard, another integration).
    pub reference: String,
    /// The processor's own id of the refund (Stripe's `re_…`).
    pub processor_reference: Option<String>,
    pub amount: i64,
    pub status: RefundStatus,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ProcessorError {
    #[error("the processor could not be reached: {0}")]
    Unavailable(String),
    /// No answer in time: the operation may or may not have happened.
    #[error("the processor did not answer in time")]
    Timeout,
    #[error("the processor refused: {0}")]
    Refused(String),
    /// The request was sent and no answer tells what became of it (a 5xx, a connection
    /// broken after the request was written): the operation may or may not have happened.
    #[error("the processor's answer is unknown: {0}")]
    Unknown(String),
}

type Answer<T> = LocalBoxFuture<'static, Result<T, ProcessorError>>;

/// A payment processor. Its futures run on the payment actor's arbiter (they need not be
/// `Send`). Operations that move money carry an idempotency key, so a retry after a lost
/// answer never does them twice.
pub trait Processor: Send + Sync + 'static {
    /// Whether the processor accepts this card for later charges (saved methods, mandates).
    fn can_save(&self, _card: &StoredCard) -> bool {
        true
    }
    /// Whether a card typed in (its number and code) may be sent to it. A Stripe account takes
    /// them only when the merchant says Stripe approved it for raw card data.
    fn takes_card_numbers(&self) -> bool {
        true
    }
    /// The key with which a buyer's browser makes a payment method at the processor itself
    /// (Stripe's publishable key, for Stripe.js), when it has one.
    fn browser_key(&self) -> Option<String> {
        None
    }
    /// Whether it keeps the cards it saves itself (Stripe, under its Customers): such a card is
    /// saved only when the processor says it saved it (`AuthResult::token`, once the payment
    /// is approved).
    fn keeps_cards(&self) -> bool {
        false
    }
    /// Whether it may be tried now (an open circuit breaker says no).
    fn available(&self) -> bool {
        true
    }
    /// Whether what it does outlives payd's process. payd records its intent before asking
    /// such a processor (`payments::intent`); a stateless in-process one (the sandbox) leaves
    /// nothing behind that a crash could make payd forget.
    fn keeps_state(&self) -> bool {
        true
    }
    /// How long a request may take before payd gives up on its answer: a sync that finds no
    /// trace of an authorization older than this tells that it never arrived.
    fn answer_deadline(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
    /// Why the processor cannot take `amount` of `currency` as it is (an amount its units
    /// cannot hold), if it cannot: payd refuses such an amount (400) rather than round it.
    fn refuses_amount(&self, _amount: i64, _currency: &str) -> Option<String> {
        None
    }
    /// Whether a capture that is not final leaves the rest of the authorization capturable
    /// (Stripe releases it unless the payment was confirmed for multicapture).
    fn captures_more_than_once(&self) -> bool {
        true
    }
    /// Whether an authorization waiting for the buyer's 3-D Secure is held at the processor, so
    /// that cancelling or expiring the payment must void it there (Stripe's `requires_action`
    /// PaymentIntent).
    fn voids_challenges(&self) -> bool {
        false
    }
    /// Where the buyer completes the 3-D Secure of the authorization behind `reference`.
    fn challenge(&self, _reference: &str) -> Answer<Challenge> {
        Box::pin(futures_util::future::ready(Ok(Challenge::Here)))
    }
    /// Whether a capture can be voided (within payd's void window) rather than refunded.
    fn voids_captures(&self) -> bool {
        true
    }
    fn authorize(&self, req: AuthRequest) -> Answer<AuthResult>;
    /// Finds an authorization whose answer was lost: sent at `at` under `reference`, with what
    /// the processor kept to send it again (`AuthResult::resend`). A processor that takes
    /// payd's reference as its own is asked by a sync of it.
    fn recover(
        &self,
        reference: &str,
        _at: DateTime<Utc>,
        _resend: Option<&str>,
        now: DateTime<Utc>,
    ) -> Answer<Recovered> {
        let (sync, reference) = (self.sync(reference, now), reference.to_owned());
        Box::pin(async move {
            Ok(Recovered {
                view: sync.await?,
                reference: Some(reference),
                error: None,
                token: None,
            })
        })
    }
    /// The buyer finished (or failed) the challenge of a `ChallengeRequired` authorization; for
    /// `Challenge::Started`, asked to start it (`return_url` is where the processor's page
    /// sends the buyer back to, as in `AuthRequest`).
    fn complete_challenge(
        &self,
        reference: &str,
        approved: bool,
        return_url: &str,
        now: DateTime<Utc>,
    ) -> Answer<AuthResult>;
    fn capture(&self, reference: &str, amount: i64, currency: &str, key: &str) -> Answer<()>;
    fn void(&self, reference: &str, key: &str) -> Answer<()>;
    /// What the processor holds for this reference now.
    fn sync(&self, reference: &str, now: DateTime<Utc>) -> Answer<ProcessorView>;
    /// Refunds `amount` of the payment behind `reference`.
    fn refund(
        &self,
        reference: &str,
        amount: i64,
        currency: &str,
        now: DateTime<Utc>,
        key: &str,
    ) -> Answer<RefundResult>;
    /// Where the refund behind `refund_reference` stands now.
    fn sync_refund(&self, refund_reference: &str, now: DateTime<Utc>) -> Answer<RefundResult>;
    /// Every refund the processor applied to the payment behind `reference`, also those made
    /// outside payd. The sandbox's refunds are all payd's own: it lists none.
    fn refunds(&self, _reference: &str) -> Answer<Vec<AppliedRefund>> {
        Box::pin(futures_util::future::ready(Ok(Vec::new())))
    }
    /// The processor's own dispute objects against the payment behind `reference` (Stripe's),
    /// for the code that follows that processor's disputes; none for a processor whose disputes
    /// reach payd otherwise.
    fn cases(&self, _reference: &str) -> Answer<Vec<serde_json::Value>> {
        Box::pin(futures_util::future::ready(Ok(Vec::new())))
    }
    /// Concedes the processor's own dispute `case` (its id there): the buyer keeps the money.
    /// `key` makes a retry of the same request harmless. Refused by a processor whose disputes
    /// reach payd otherwise.
    fn close_dispute(&self, _case: &str, _key: &str) -> Answer<()> {
        Box::pin(futures_util::future::ready(Err(ProcessorError::Refused(
            "this processor holds no disputes of its own".into(),
        ))))
    }
    /// Submits the merchant's `explanation` as the evidence of the processor's own dispute
    /// `case`, for the processor to decide on.
    fn submit_dispute(&self, _case: &str, _explanation: &str, _key: &str) -> Answer<()> {
        Box::pin(futures_util::future::ready(Err(ProcessorError::Refused(
            "this processor holds no disputes of its own".into(),
        ))))
    }
    /// The processor's own events made since `since` (Unix seconds), oldest first, with the
    /// time up to which they were read (Stripe's `GET /v1/events`), for the code that follows
    /// that processor's events; none for a processor whose events reach payd otherwise.
    fn events_since(&self, since: i64) -> Answer<(Vec<serde_json::Value>, i64)> {
        Box::pin(futures_util::future::ready(Ok((Vec::new(), since))))
    }
    /// Gives back what an authorization payd does not hold took (`reference`: the processor's
    /// own, one payd never recorded as its payment's, made for `payment_id`): voids it if it is
    /// only authorized, refunds it in full if it was captured. What it did (`canceled`,
    /// `refunded`), or `None` when there was nothing to give back.
    fn release(&self, _reference: &str, _payment_id: &str) -> Answer<Option<&'static str>> {
        Box::pin(futures_util::future::ready(Ok(None)))
    }
    /// The card behind a payment method the processor holds (`method`: its id there, or a card
    /// token its browser library made, which becomes a payment method now); `Refused` when it
    /// holds no such method, or holds none at all.
    fn method_card(&self, _method: &str) -> Answer<MethodCard> {
        Box::pin(futures_util::future::ready(Err(ProcessorError::Refused(
            "this processor holds no payment methods of its own".into(),
        ))))
    }
    /// Forgets a card it saved (its saved method was deleted at payd).
    fn forget(&self, _token: &ProcessorToken) -> Answer<()> {
        Box::pin(futures_util::future::ready(Ok(())))
    }
}
