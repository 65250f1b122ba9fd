//! What a payment's actor is asked and answers: its commands, who asks (`Access`), what a
//! command returns (`Done`) and its errors, mapped to the one API error here.

use payd_entity::{dispute, payment, refund};
use sea_orm::DbErr;

use super::{api::LineInput, machine::Refusal, refunds, store::CommitError};
use crate::{
    auth::keys::{Caller, KeyKind, Scope},
    disputes,
    error::{ApiError, ErrorType},
    fields::Metadata,
    processors::{ProcessorError, SecretCard, StoredCard},
};

#[derive(Debug, thiserror::Error)]
pub enum PaymentError {
    #[error("no such payment")]
    NotFound,
    #[error("the client_secret does not match this payment")]
    Forbidden,
    #[error("no such refund")]
    RefundNotFound,
    #[error(transparent)]
    RefundRefused(#[from] refunds::Refusal),
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("invalid request: {0}")]
    Invalid(ApiError),
    #[error("the payment was changed concurrently")]
    LostRace,
    #[error(transparent)]
    Processor(#[from] ProcessorError),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

impl From<ApiError> for PaymentError {
    fn from(e: ApiError) -> Self {
        PaymentError::Invalid(e)
    }
}

impl From<CommitError> for PaymentError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::LostRace | CommitError::Refused(_) => PaymentError::LostRace,
            CommitError::Db(e) => PaymentError::Db(e),
        }
    }
}

impl From<PaymentError> for ApiError {
    #[track_caller]
    fn from(e: PaymentError) -> Self {
        match e {
            PaymentError::NotFound => ApiError::not_found("payment"),
            PaymentError::Forbidden => ApiError::forbidden(
                "client_secret_mismatch",
                "the client_secret does not belong to this payment",
            )
            .param("client_secret"),
            PaymentError::Refused(r) => match r {
                super::machine::Refusal::InvalidState(_) => {
                    ApiError::conflict("invalid_state", r.to_string())
                }
                super::machine::Refusal::AmountNotPositive => {
                    ApiError::invalid("amount_not_positive", r.to_string()).param("amount")
                }
                super::machine::Refusal::AmountExceedsCapturable(_) => {
                    ApiError::invalid("amount_exceeds_capturable", r.to_string()).param("amount")
                }
                super::machine::Refusal::DisputeOpen(_) => {
                    ApiError::conflict("dispute_open", r.to_string()).param("payment_id")
                }
                super::machine::Refusal::RefundExists => {
                    ApiError::conflict("refund_exists", r.to_string()).param("payment_id")
                }
                super::machine::Refusal::VoidWindowClosed => {
                    ApiError::conflict("invalid_state", r.to_string())
                }
            },
            PaymentError::Invalid(e) => e,
            PaymentError::RefundNotFound => ApiError::not_found("refund"),
            PaymentError::RefundRefused(r) => match r {
                super::refunds::Refusal::InvalidState(_) => {
                    ApiError::conflict("invalid_state", r.to_string())
                }
                super::refunds::Refusal::DisputeOpen { .. } => {
                    ApiError::conflict("dispute_open", r.to_string()).param("payment_id")
                }
                super::refunds::Refusal::ExceedsRefundable { .. }
                | super::refunds::Refusal::LineAmountExceeded { .. } => {
                    let mut e = ApiError::invalid("amount_exceeds_refundable", r.to_string());
                    e.param = r.param().map(str::to_owned);
                    e
                }
                _ => {
                    let mut e = ApiError::invalid("parameter_invalid", r.to_string());
                    e.param = r.param().map(str::to_owned);
                    e
                }
            },
            PaymentError::LostRace => ApiError::concurrent_update("payment"),
            PaymentError::Processor(p) => ApiError::new(
                actix_web::http::StatusCode::BAD_GATEWAY,
                ErrorType::Processor,
                "processor_error",
                p.to_string(),
            ),
            PaymentError::Db(e) => e.into(),
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
    pub lines: Option<Vec<LineInput>>,
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
        refund_id: String,
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

    /// What this caller may do: a publishable key must show the payment's `client_secret`.
    pub fn of(caller: &Caller, client_secret: Option<String>) -> Result<Access, ApiError> {
        let client_secret = match caller.kind {
            KeyKind::Secret => None,
            KeyKind::Publishable => Some(client_secret.ok_or_else(|| {
                ApiError::forbidden(
                    "client_secret_required",
                    "a publishable key needs the payment's client_secret",
                )
                .param("client_secret")
            })?),
        };
        Ok(Access {
            scope: caller.scope(),
            client_secret,
        })
    }
}
