//! What a change found not to hold inside its transaction: the refusal a [`Write::Require`]
//! names, carried back as `CommitError::Refused`. The commit path only carries it; what it
//! means to a client is the error module's (`From<Conflict> for ApiError`) or the caller's,
//! which matches on it.
//!
//! [`Write::Require`]: crate::commit::Write::Require

/// A condition a change needs, found not to hold when it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// The owner (a merchant or a shop) would pass one of its bounds: the setting, and its
    /// value.
    #[error("{setting} ({max}) reached")]
    Bound { setting: &'static str, max: u64 },
    /// A customer with an active mandate cannot be deleted.
    #[error("the customer has an active mandate")]
    ActiveMandate,
    /// An invoice made from a payment may not be finalized once the payment was refunded
    /// (meanwhile: the finalize's commit checks it).
    #[error("the payment was refunded")]
    PaymentRefunded,
    /// A reservation the shop's available balance does not cover.
    #[error("the available balance does not cover it")]
    InsufficientBalance,
    /// A product some payment line names cannot be deleted.
    #[error("the product has sales")]
    ProductHasSales,
    /// A bundle or an add-on group of the shop holds the product …
    #[error("a bundle or an add-on group holds the product")]
    ProductInUse,
    /// … or the price.
    #[error("a bundle or an add-on group holds the price")]
    PriceInUse,
    /// An event redelivered by hand that retention purged meanwhile.
    #[error("the event is gone")]
    EventMissing,
    /// A delivery that was made meanwhile.
    #[error("deliveries were made")]
    DeliveriesMade,
}
