//! The risk assessment record, the operator's request and a shop's risk view.

use chrono::{DateTime, Utc};
use payd_entity::risk_assessment;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::machine::Counts;
use crate::pagination::List;

/// The figures of an assessment, counted over its window.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RiskFigures {
    /// Disputes opened per unit of volume.
    pub dispute_rate: f64,
    /// Refunds made per unit of volume.
    pub refund_rate: f64,
    /// Declined attempts per unit of volume.
    pub decline_rate: f64,
    /// Payments authorized plus attempts declined, of the payments created in the window.
    pub volume: i64,
    pub disputes: i64,
    pub refunds: i64,
    pub declines: i64,
}

impl RiskFigures {
    pub fn of(c: &Counts) -> Self {
        let r = c.rates();
        // Four decimals: a rate is read as a percentage with two.
        let round = |x: f64| (x * 10_000.0).round() / 10_000.0;
        Self {
            dispute_rate: round(r.dispute_rate),
            refund_rate: round(r.refund_rate),
            decline_rate: round(r.decline_rate),
            volume: c.payments,
            disputes: c.disputes,
            refunds: c.refunds,
            declines: c.declines,
        }
    }
}

pub use payd_model::risk::Thresholds;

/// One assessment of a shop's risk (`risk_…`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RiskRecord {
    pub risk_id: String,
    pub profile_id: String,
    pub test_mode: bool,
    /// `low`, `elevated`, `high` or `critical`.
    pub band: String,
    /// The band of the shop's assessment before this one (none for its first).
    pub previous_band: Option<String>,
    pub figures: RiskFigures,
    /// The rolling window the figures were counted over, in seconds.
    pub window: i64,
    /// The thresholds the band was decided under.
    pub thresholds: Option<Thresholds>,
    /// `schedule` or `operator`.
    pub trigger: String,
    pub assessed_at: DateTime<Utc>,
}

impl RiskRecord {
    /// A stored `thresholds` that does not decode is an error (`stored`), never `null`.
    pub fn render(m: &risk_assessment::Model) -> Self {
        let counts = Counts {
            payments: m.payments,
            declines: m.declines,
            refunds: m.refunds,
            disputes: m.disputes,
        };
        Self {
            risk_id: m.id.to_string(),
            profile_id: m.profile_id.to_string(),
            test_mode: m.test_mode,
            band: m.band.to_string(),
            previous_band: m.previous_band.map(|b| b.to_string()),
            figures: RiskFigures::of(&counts),
            window: m.window_secs,
            thresholds: Some(m.thresholds.0.clone()),
            trigger: m.trigger.to_string(),
            assessed_at: m.assessed_at,
        }
    }
}

/// `POST /admin/shops/{profile_id}/risk/assess`: which of the shop's modes to assess (by
/// default the deployment's: test in a sandbox, live in production).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AssessRequest {
    #[serde(default)]
    pub test_mode: Option<bool>,
}

/// A shop's risk: its latest assessment, and its assessments newest first (cursors on
/// `risk_id`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ShopRisk {
    pub profile_id: String,
    /// The band of the latest assessment; `low` before the first.
    pub band: String,
    pub latest: Option<RiskRecord>,
    pub history: List<RiskRecord>,
}
