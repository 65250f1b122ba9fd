//! What a payment's actor is asked and answers: its commands, who asks (`Access`), what a
//! command returns (`Done`) and its errors, mapped to the one API error here.

use payd_entity::{dispute, payment, refund};
use sea_orm::DbErr;

use super::{machine::Refusal, refunds, store::CommitError};
use crate::{
    auth::keys::{Caller, KeyKind, Scope},
    conflict::Conflict,
    customers::api::MandateRefusal,
    disputes,
    error::Unanswered,
    fields::Metadata,
    processors::{ProcessorError, SecretCard, StoredCard},
};

#[derive(Debug, thiserror::Error)]
pub enum PaymentError {
    #[error("no such payment")]
    NotFound,
    #[error("the client_secret does not match this payment")]
    Forbidden,
    #[error("a publishable key needs the payment's client_secret")]
    SecretRequired,
    #[error("no such refund")]
    RefundNotFound,
    #[error(transparent)]
    RefundRefused(#[from] refunds::Refusal),
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("confirm needs a payment method")]
    PaymentMethodRequired,
    #[error("no such mandate")]
    MandateNotFound,
    #[error(transparent)]
    Mandate(#[from] MandateRefusal),
    #[error("the payment was changed concurrently")]
    LostRace,
    /// A condition the change needed no longer held when it was written.
    #[error(transparent)]
    Conflict(Conflict),
    /// An operation sent to the processor has no recorded outcome yet; the settle job asks
    /// again within `retry_after` seconds.
    #[error("an operation sent to the processor has no recorded outcome yet; payd asks the processor again shortly, retry after that")]
    OperationPending { retry_after: u32 },
    #[error(transparent)]
    Processor(#[from] ProcessorError),
    /// What the payment's processor cannot do as asked (an amount its units cannot hold, a
    /// capture it would not leave open); `param` names the field.
    #[error("{message}")]
    NotForProcessor {
        param: &'static str,
        message: String,
    },
    /// An update that would change lines the catalog checked at creation (`param` names
    /// what the update sends).
    #[error("lines that name catalog products or prices are set when the payment is created")]
    CatalogLinesFixed(String),
    #[error("the lines add up to {total}, not to the amount {amount}")]
    LinesMismatch { total: i64, amount: i64 },
    /// A new amount the payment's stored lines do not add up to.
    #[error("the payment's lines add up to {total}; send new lines with the new amount")]
    StoredLinesMismatch { total: i64 },
    #[error(transparent)]
    Unanswered(#[from] Unanswered),
    /// payd's own fault (a stored payment it cannot read as it wrote it): a 500.
    #[error("{0}")]
    Internal(String),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

impl From<payd_actors::ActorError<PaymentError>> for PaymentError {
    fn from(e: payd_actors::ActorError<PaymentError>) -> Self {
        Unanswered::fold(e)
    }
}

impl From<CommitError> for PaymentError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::LostRace => PaymentError::LostRace,
            CommitError::Refused(c) => PaymentError::Conflict(c),
            CommitError::Db(e) => PaymentError::Db(e),
        }
    }
}

/// Who asks. `None` on a message means payd itself (a scheduled job).
#[derive(Debug, Clone)]
pub struct Access {
    /// The merchant, mode and shop the caller reaches.
    pub scope: Scope,
    /// Set for browser callers (publishable key or hosted checkout): must match.
    pub client_secret: Option<String>,
}

/// Fields of an update, already checked at the edge.
#[derive(Debug, Clone, Default)]
pub struct Patch {
    pub amount: Option<i64>,
    pub currency: Option<String>,
    pub manual_capture: Option<bool>,
    pub card: Option<StoredCard>,
    /// Parsed; whether they add up to the payment's amount is the actor's to check.
    pub lines: Option<Vec<super::machine::Line>>,
    pub metadata: Option<Metadata>,
    pub description: Option<String>,
    pub return_url: Option<String>,
}

#[derive(Debug, Clone)]
pub enum Command {
    Confirm {
        card: Option<StoredCard>,
        /// The number and CVC the buyer just entered, for a processor that needs them.
        secret: Option<SecretCard>,
        return_url: Option<String>,
    },
    Update(Box<Patch>),
    Capture {
        amount: Option<i64>,
        final_capture: bool,
    },
    Cancel,
    Sync,
    Expire,
    CompleteChallenge {
        approve: bool,
    },
    /// Refund part or all of what was captured.
    Refund {
        ask: refunds::Ask,
        reason: Option<String>,
        metadata: Metadata,
    },
    /// Ask the processor where a pending refund stands.
    SettleRefund {
        refund_id: crate::ids::RefundId,
    },
    /// The processor reports the buyer's dispute of what was captured.
    OpenDispute,
    /// A wallet processor's case against the payment is imported: its dispute is opened.
    ImportCase(disputes::actor::CaseOpening),
}

/// A command's result: the payment as it now is, the refund it made or changed, and the
/// dispute it opened (committed by this command, not found there).
#[derive(Debug, Clone)]
pub struct Done {
    pub payment: payment::Model,
    pub refund: Option<refund::Model>,
    pub dispute: Option<dispute::Model>,
}

impl Done {
    pub(super) fn unchanged(payment: &payment::Model) -> Self {
        Self {
            payment: payment.clone(),
            refund: None,
            dispute: None,
        }
    }

    /// The payment as it is, and this refund.
    pub(super) fn refund(payment: &payment::Model, refund: refund::Model) -> Self {
        Self {
            payment: payment.clone(),
            refund: Some(refund),
            dispute: None,
        }
    }
}

/// Whether two client secrets are the same, compared in constant time (a caller learns
/// nothing from how long a wrong one takes to refuse).
pub fn same_secret(a: &str, b: &str) -> bool {
    subtle::ConstantTimeEq::ct_eq(a.as_bytes(), b.as_bytes()).into()
}

impl Access {
    /// Whether the caller may act on a payment with this `client_secret`: a server key always,
    /// a browser caller only with that secret.
    pub fn shows(&self, client_secret: &str) -> bool {
        self.client_secret
            .as_deref()
            .is_none_or(|s| same_secret(s, client_secret))
    }

    /// A server's access to what its scope holds: a secret key's, or payd's own for a
    /// payment it makes for another resource.
    pub fn server(scope: &Scope) -> Access {
        Access {
            scope: scope.clone(),
            client_secret: None,
        }
    }

    /// What this caller may do: a publishable key must show the payment's `client_secret`.
    pub fn of(caller: &Caller, client_secret: Option<String>) -> Result<Access, PaymentError> {
        let client_secret = match caller.kind {
            KeyKind::Secret => None,
            KeyKind::Publishable => Some(client_secret.ok_or(PaymentError::SecretRequired)?),
        };
        Ok(Access {
            scope: caller.scope(),
            client_secret,
        })
    }
}
