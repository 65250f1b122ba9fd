//! The wallet case, its history and its actions as the routes show them, and the request types
//! of the wallet routes and the sandbox triggers.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::machine::{self, Action, CaseType, Status};
use crate::{
    error::ApiError,
    fields::{check_text, parse_amount},
    pagination::ListQuery,
};

/// A seller case at the wallet processor, as `GET /disputes/wallet/cases/{case_id}` returns it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Case {
    /// The processor's id of the case.
    pub case_id: String,
    /// Rises by one with each committed change of this object: a receiver keeps, per object,
    /// the highest it has seen.
    pub version: i64,
    /// `INQUIRY`, `CHARGEBACK`, `PRE_ARBITRATION` or `ARBITRATION`.
    pub case_type: String,
    /// `WAITING_FOR_SELLER_RESPONSE`, `WAITING_FOR_BUYER_RESPONSE`, `UNDER_REVIEW`,
    /// `APPEALABLE` or `RESOLVED`.
    pub status: String,
    /// The dispute stage the case type maps onto: `pre_dispute`, `dispute`, `pre_arbitration`
    /// or `arbitration`.
    pub stage: String,
    /// How a `RESOLVED` case ended: `RESOLVED_SELLER_FAVOUR`, `RESOLVED_BUYER_FAVOUR`,
    /// `ACCEPTED` or `CANCELED_BY_BUYER`.
    pub outcome: Option<String>,
    /// The dispute that follows the case; `null` until the case is imported.
    pub dispute_id: Option<String>,
    pub payment_id: String,
    /// The disputed amount, in minor units.
    pub amount: i64,
    pub currency: String,
    /// The buyer's reason, as given.
    pub reason: String,
    /// The seller's offer while the buyer considers it.
    pub offer_amount: Option<i64>,
    /// The buyer shipped the item back: the seller may acknowledge the return.
    pub return_shipped: bool,
    /// When the processor acts on the case next, if nobody else does first: the seller's
    /// response deadline, the end of a review or of the appeal window, the buyer's reply.
    pub due_by: Option<DateTime<Utc>>,
    pub profile_id: String,
    pub test_mode: bool,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

impl Case {
    pub fn render(c: &payd_entity::wallet_case::Model, dispute_id: Option<String>) -> Self {
        Self {
            case_id: c.id.clone(),
            version: c.version,
            case_type: c.case_type.to_string(),
            status: c.status.to_string(),
            stage: c.case_type.stage().to_string(),
            outcome: c.outcome.map(|o| o.to_string()),
            dispute_id,
            payment_id: c.payment_id.to_string(),
            amount: c.amount,
            currency: c.currency.clone(),
            reason: c.reason.clone(),
            offer_amount: c.offer_amount,
            return_shipped: c.return_shipped,
            due_by: c.due_at,
            profile_id: c.profile_id.to_string(),
            test_mode: c.test_mode,
            created: c.created_at,
            updated: c.updated_at,
        }
    }
}

/// One entry of a case's history.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryEntry {
    pub case_id: String,
    /// 1, 2, 3 … in the order written.
    pub seq: i64,
    /// `buyer`, `seller` or `processor`.
    pub actor: String,
    /// What happened: `opened`, a seller's action (`accept_claim`, `provide_evidence`,
    /// `send_message`, `make_offer`, `appeal`, `escalate`, `acknowledge_return`), `reply`,
    /// `offer_accepted`, `return_shipped`, `escalated`, `withdrawn`, `decided` or
    /// `deadline_passed`.
    pub kind: String,
    /// The case type after the entry.
    pub case_type: String,
    /// The status before, when the entry changed it.
    pub status_from: Option<String>,
    /// The status after, when the entry changed it.
    pub status_to: Option<String>,
    pub message: Option<String>,
    pub amount: Option<i64>,
    pub file_ids: Vec<String>,
    pub created: DateTime<Utc>,
}

impl HistoryEntry {
    pub fn render(e: &payd_entity::wallet_case_entry::Model) -> Result<Self, sea_orm::DbErr> {
        Ok(Self {
            case_id: e.case_id.clone(),
            seq: e.seq,
            actor: e.actor.to_string(),
            kind: e.kind.to_string(),
            case_type: e.case_type.to_string(),
            status_from: e.status_from.map(|s| s.to_string()),
            status_to: e.status_to.map(|s| s.to_string()),
            message: e.message.clone(),
            amount: e.amount,
            file_ids: e.file_ids.clone().unwrap_or_default().0,
            created: e.created_at,
        })
    }
}

/// A case's whole history, oldest first (a case holds at most a few hundred entries).
#[derive(Debug, Serialize, ToSchema)]
pub struct History {
    pub data: Vec<HistoryEntry>,
    pub has_more: bool,
}

/// An action the seller may take now, and what it takes.
#[derive(Debug, Serialize, ToSchema)]
pub struct AllowedAction {
    /// `accept_claim`, `provide_evidence`, `send_message`, `make_offer`, `appeal`,
    /// `escalate` or `acknowledge_return`.
    pub action: String,
    /// The request fields the action needs.
    pub required: Vec<String>,
    /// The request fields the action takes besides.
    pub optional: Vec<String>,
}

impl AllowedAction {
    pub fn of(a: Action) -> Self {
        let (required, optional): (&[&str], &[&str]) = match a {
            Action::ProvideEvidence => (&["file_ids"], &["message"]),
            Action::SendMessage => (&["message"], &[]),
            Action::MakeOffer => (&["amount"], &["message"]),
            _ => (&[], &["message"]),
        };
        let owned = |f: &[&str]| f.iter().map(|s| (*s).to_owned()).collect();
        Self {
            action: a.as_str().to_owned(),
            required: owned(required),
            optional: owned(optional),
        }
    }
}

/// The actions a case allows now.
#[derive(Debug, Serialize, ToSchema)]
pub struct Actions {
    pub case_id: String,
    pub case_type: String,
    pub status: String,
    pub data: Vec<AllowedAction>,
}

/// `POST /disputes/wallet/cases/{case_id}/actions`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionRequest {
    /// `accept_claim`, `provide_evidence`, `send_message`, `make_offer`, `appeal`,
    /// `escalate` or `acknowledge_return`.
    pub action: String,
    /// To the buyer and the processor (at most 2 000 characters); required by `send_message`.
    #[serde(default)]
    pub message: Option<String>,
    /// The offer of `make_offer`, in minor units: at most the case's amount.
    #[serde(default)]
    pub amount: Option<i64>,
    /// The uploaded files `provide_evidence` sends (1 to 10).
    #[serde(default)]
    pub file_ids: Option<Vec<String>>,
}

/// `POST /disputes/wallet/import`: every case of the caller's scope, or the cases named.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    /// Only these cases (at most 100).
    #[serde(default)]
    pub case_ids: Option<Vec<String>>,
    /// Only this shop's cases (a caller scoped to a shop imports only its own anyway).
    #[serde(default)]
    pub profile_id: Option<String>,
    /// At most this many cases, 1 to 1 000 (default 100); `has_more` tells if more are left.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// Continue after this case id (the `last_case_id` of the previous import).
    #[serde(default)]
    pub starting_after: Option<String>,
}

/// An import as asked: the cases named (1 to 100) or at most `limit` of the caller's scope.
#[derive(Debug)]
pub struct Import {
    pub case_ids: Option<Vec<String>>,
    pub limit: u64,
    pub starting_after: Option<String>,
}

impl ImportRequest {
    pub fn parse(self) -> Result<Import, ApiError> {
        let limit = match self.limit.unwrap_or(100) {
            limit @ 1..=1000 => limit as u64,
            _ => return Err(ApiError::invalid_param("limit", "limit must be 1 to 1000")),
        };
        if self.case_ids.as_ref().is_some_and(|ids| ids.len() > 100) {
            return Err(ApiError::invalid_param("case_ids", "at most 100 case ids"));
        }
        Ok(Import {
            case_ids: self.case_ids,
            limit,
            starting_after: self.starting_after,
        })
    }
}

/// What an import did to one case.
#[derive(Debug, Serialize, ToSchema)]
pub struct Imported {
    pub case_id: String,
    /// The dispute following the case; `null` when it could not be made (`skipped`).
    pub dispute_id: Option<String>,
    /// `created` (a new dispute), `updated` (the dispute followed the case), `unchanged`, or
    /// `skipped` (the payment has nothing left to dispute, or is disputed otherwise).
    pub result: String,
    /// The dispute's status after the import.
    pub dispute_status: Option<String>,
}

/// The answer of an import.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImportReport {
    pub data: Vec<Imported>,
    pub created: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub skipped: usize,
    /// More cases are left: import again with `starting_after: last_case_id`.
    pub has_more: bool,
    pub last_case_id: Option<String>,
}

/// Filters of `GET /disputes/wallet/cases`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListCasesQuery {
    /// Only this shop's cases (a caller scoped to a shop sees only its own anyway).
    #[serde(default)]
    pub profile_id: Option<String>,
    #[serde(default)]
    pub payment_id: Option<String>,
    /// A case status, e.g. `WAITING_FOR_SELLER_RESPONSE`.
    #[serde(default)]
    pub status: Option<String>,
    /// `INQUIRY`, `CHARGEBACK`, `PRE_ARBITRATION` or `ARBITRATION`.
    #[serde(default)]
    pub case_type: Option<String>,
    #[serde(default)]
    pub created_after: Option<DateTime<Utc>>,
    #[serde(default)]
    pub created_before: Option<DateTime<Utc>>,
    /// 1 to 100 (default 10).
    #[serde(default)]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub starting_after: Option<String>,
    #[serde(default)]
    pub ending_before: Option<String>,
}

impl ListCasesQuery {
    /// The filters name a status and a case type there are.
    pub fn check_filters(&self) -> Result<(), ApiError> {
        if let Some(s) = self
            .status
            .as_deref()
            .filter(|s| Status::parse(s).is_none())
        {
            return Err(ApiError::invalid_param(
                "status",
                format!("unknown status {s:?}"),
            ));
        }
        if let Some(t) = self
            .case_type
            .as_deref()
            .filter(|t| CaseType::parse(t).is_none())
        {
            return Err(ApiError::invalid_param(
                "case_type",
                format!("unknown case_type {t:?}"),
            ));
        }
        Ok(())
    }
}

impl ListCasesQuery {
    pub fn page_query(&self) -> ListQuery {
        ListQuery {
            limit: self.limit,
            starting_after: self.starting_after.clone(),
            ending_before: self.ending_before.clone(),
        }
    }
}

/// `POST /sandbox/wallet/cases`: the buyer opens a case against a captured payment.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenCaseRequest {
    pub payment_id: String,
    /// `INQUIRY` or `CHARGEBACK`.
    pub case_type: String,
    /// The buyer's reason, free text (1 to 500 characters), stored as given.
    pub reason: String,
    /// The disputed amount in minor units; defaults to what is captured and not refunded.
    #[serde(default)]
    pub amount: Option<i64>,
}

/// At most this many characters in a message to the buyer.
pub const MAX_MESSAGE: usize = 2_000;
/// At most this many files with one `provide_evidence`.
pub const MAX_EVIDENCE_FILES: usize = 10;

impl ActionRequest {
    /// The action with what it carries; a field the action does not take, or one it needs and
    /// lacks, is 400 naming the field.
    pub fn parse(self, max_amount: i64) -> Result<machine::Request, ApiError> {
        let action = Action::parse(&self.action).ok_or_else(|| {
            let all: Vec<_> = Action::ALL.iter().map(|a| a.as_str()).collect();
            ApiError::invalid_param(
                "action",
                format!(
                    "unknown action {:?}; one of {}",
                    self.action,
                    all.join(", ")
                ),
            )
        })?;
        let message = check_text("message", self.message.as_ref(), MAX_MESSAGE)?
            .filter(|m| !m.trim().is_empty());
        let takes = AllowedAction::of(action);
        let takes = |f: &str| takes.required.iter().chain(&takes.optional).any(|t| t == f);
        for (field, given) in [
            ("amount", self.amount.is_some()),
            ("file_ids", self.file_ids.is_some()),
        ] {
            if given && !takes(field) {
                return Err(ApiError::invalid_param(
                    field,
                    format!("{} takes no {field}", action.as_str()),
                ));
            }
        }
        Ok(match action {
            Action::AcceptClaim => machine::Request::AcceptClaim { message },
            Action::Appeal => machine::Request::Appeal { message },
            Action::Escalate => machine::Request::Escalate { message },
            Action::AcknowledgeReturn => machine::Request::AcknowledgeReturn { message },
            Action::SendMessage => machine::Request::SendMessage {
                message: message.ok_or_else(|| {
                    ApiError::invalid_param("message", "send_message needs a message")
                })?,
            },
            Action::MakeOffer => machine::Request::MakeOffer {
                amount: parse_amount(
                    "amount",
                    self.amount.ok_or_else(|| {
                        ApiError::invalid_param("amount", "make_offer needs an amount")
                    })?,
                    max_amount,
                )?,
                message,
            },
            Action::ProvideEvidence => {
                let file_ids = self.file_ids.unwrap_or_default();
                if file_ids.is_empty() || file_ids.len() > MAX_EVIDENCE_FILES {
                    return Err(ApiError::invalid_param(
                        "file_ids",
                        format!("provide_evidence needs 1 to {MAX_EVIDENCE_FILES} file ids"),
                    ));
                }
                if file_ids
                    .iter()
                    .any(|f| crate::ids::FileId::parse(f).is_none())
                {
                    return Err(ApiError::not_found("file").param("file_ids"));
                }
                machine::Request::ProvideEvidence { message, file_ids }
            }
        })
    }
}
