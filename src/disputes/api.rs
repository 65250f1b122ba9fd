//! The dispute, evidence and file objects, and the request types of their routes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::pagination::ListQuery;

/// A dispute, as `GET /disputes/{dispute_id}` returns it and `dispute_*` events carry it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Dispute {
    pub dispute_id: String,
    /// Rises by one with each committed change of this object: a receiver keeps, per object,
    /// the highest it has seen.
    pub version: i64,
    pub payment_id: String,
    /// The amount the buyer disputes, in minor units.
    pub amount: i64,
    pub currency: String,
    /// `pre_dispute`, `dispute`, `pre_arbitration` or `arbitration`.
    pub stage: String,
    /// `opened`, `challenged`, `won`, `lost`, `accepted`, `expired` or `cancelled`.
    pub status: String,
    /// The buyer's stated reason, as the processor reports it.
    pub reason: String,
    /// Evidence must be submitted before this time, or the dispute expires (lost).
    pub evidence_due_by: DateTime<Utc>,
    pub evidence_submitted_at: Option<DateTime<Utc>>,
    /// The merchant's written explanation, sent with the evidence.
    pub explanation: Option<String>,
    /// The processor account the payment went through.
    pub processor: Option<String>,
    pub processor_reference: Option<String>,
    /// The wallet processor's case the dispute follows (`GET /disputes/wallet/cases/{case_id}`).
    pub case_id: Option<String>,
    pub test_mode: bool,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

impl Dispute {
    pub fn render(d: &payd_entity::dispute::Model) -> Self {
        Self {
            dispute_id: d.id.to_string(),
            version: d.version,
            payment_id: d.payment_id.to_string(),
            amount: d.amount,
            currency: d.currency.clone(),
            stage: d.stage.to_string(),
            status: d.status.to_string(),
            reason: d.reason.clone(),
            evidence_due_by: d.evidence_due_by,
            evidence_submitted_at: d.evidence_submitted_at,
            explanation: d.explanation.clone(),
            processor: d.processor.clone(),
            processor_reference: d.processor_reference.clone(),
            case_id: d.case_id.clone(),
            test_mode: d.test_mode,
            created: d.created_at,
            updated: d.updated_at,
        }
    }
}

/// The kinds of evidence a file can be attached as.
pub use payd_model::disputes::EvidenceType;

/// A file attached to a dispute.
#[derive(Debug, Serialize, ToSchema)]
pub struct Evidence {
    pub dispute_id: String,
    pub file_id: String,
    /// One of `receipt`, `shipping_documentation`, `customer_communication`, `refund_policy`,
    /// `cancellation_policy`, `service_documentation`, `uncategorized`.
    pub evidence_type: String,
    pub filename: String,
    pub content_type: String,
    pub size: i64,
    pub attached: DateTime<Utc>,
}

impl Evidence {
    pub fn render(e: &payd_entity::dispute_evidence::Model, f: &payd_entity::file::Model) -> Self {
        Self {
            dispute_id: e.dispute_id.to_string(),
            file_id: e.file_id.to_string(),
            evidence_type: e.evidence_type.to_string(),
            filename: f.filename.clone(),
            content_type: f.content_type.clone(),
            size: f.size,
            attached: e.created_at,
        }
    }
}

/// The evidence attached to one dispute (at most 20 files, so one page).
#[derive(Debug, Serialize, ToSchema)]
pub struct EvidenceList {
    pub data: Vec<Evidence>,
    pub has_more: bool,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachEvidenceRequest {
    pub dispute_id: String,
    pub file_id: String,
    /// Defaults to `uncategorized`.
    #[serde(default)]
    pub evidence_type: Option<String>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveEvidenceRequest {
    pub dispute_id: String,
    pub file_id: String,
}

/// The answer to removing evidence.
#[derive(Debug, Serialize, ToSchema)]
pub struct RemovedEvidence {
    pub dispute_id: String,
    pub file_id: String,
    pub deleted: bool,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitEvidenceRequest {
    pub dispute_id: String,
    /// The merchant's account of the transaction (at most 20 000 characters).
    #[serde(default)]
    pub explanation: Option<String>,
}

/// Filters of `GET /disputes/list`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListDisputesQuery {
    /// Only this shop's disputes (a caller scoped to a shop sees only its own anyway).
    #[serde(default)]
    pub profile_id: Option<String>,
    #[serde(default)]
    pub payment_id: Option<String>,
    /// `opened`, `challenged`, `won`, `lost`, `accepted`, `expired` or `cancelled`.
    #[serde(default)]
    pub status: Option<String>,
    /// `pre_dispute`, `dispute`, `pre_arbitration` or `arbitration`.
    #[serde(default)]
    pub stage: Option<String>,
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

impl ListDisputesQuery {
    pub fn page_query(&self) -> ListQuery {
        ListQuery {
            limit: self.limit,
            starting_after: self.starting_after.clone(),
            ending_before: self.ending_before.clone(),
        }
    }
}
