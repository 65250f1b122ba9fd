//! What the processors and payd's domain say to each other: a card's brand, the answer to an
//! authorization, the processor's view of a payment, and a dispute's verdict. Pure values: the
//! state machines decide on them, the processors produce them, and neither imports the other.

pub use payd_model::cards::Brand;

/// The processor's answer to an authorization (or to a completed challenge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authorization {
    /// Approved for this amount (the whole amount, or less when partially approved).
    Approved {
        amount: i64,
    },
    Declined {
        retryable: bool,
    },
    ChallengeRequired,
    ReviewRequired,
    /// Pending, or no answer (a timeout): never a failure on a guess.
    Pending,
    /// The processor refused the request for the merchant's configuration (Stripe's refusal
    /// of card numbers from an account not approved for them): the card was never tried. The
    /// payment may be confirmed again, and the attempt does not count against its
    /// `max_attempts`.
    Refused,
}

/// What the processor reports when asked (force_sync, or the settle job).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessorView {
    /// Nothing settled yet.
    Pending,
    /// The processor agrees with what we hold; nothing to change.
    Unchanged,
    Authorized {
        amount: i64,
    },
    Captured {
        amount: i64,
    },
    Declined {
        retryable: bool,
    },
    Voided,
    /// The processor released the authorization itself when its window to capture closed
    /// (Stripe's `cancellation_reason: automatic`): it lapsed rather than being voided.
    Lapsed,
    /// An off-session charge the card's issuer wants the buyer to authenticate (Stripe's
    /// `authentication_required`): it waits for the buyer (`Challenge::Started`).
    AwaitsBuyer,
    /// The processor has no trace of the reference: the request never reached it (or has not
    /// yet).
    Unknown,
}

/// How a challenged dispute ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Won,
    Lost,
}

/// A processor's reference as the API shows it: the processor's own id (Stripe's `pi_…` and
/// `re_…`, a remote processor's reference). The sandbox's references encode its test
/// behaviour for itself and name nothing outside payd: never shown.
pub fn shown_reference(reference: Option<&str>) -> Option<String> {
    reference
        .filter(|r| !r.starts_with("sbx_") && !r.starts_with("sbxr_"))
        .map(str::to_owned)
}
