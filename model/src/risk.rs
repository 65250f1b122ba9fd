//! A shop's risk assessment: its band and what asked for it; the rules are
//! `payd::risk::machine`.

text_enum! {
    /// Ordered by severity.
    #[derive(PartialOrd, Ord)]
    pub enum Band {
        Low = "low",
        Elevated = "elevated",
        High = "high",
        Critical = "critical",
    }
}

text_enum! {
    /// What started an assessment.
    pub enum Trigger {
        Schedule = "schedule",
        Operator = "operator",
    }
}

/// The rates (0–1) from which a shop is in a band: reaching any one of them is enough.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RiskThresholds {
    pub dispute_rate: f64,
    pub refund_rate: f64,
    pub decline_rate: f64,
}

/// The rates from which the shop would have been in each band.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = RiskBandThresholds)]
pub struct Thresholds {
    #[schema(value_type = Object)]
    pub elevated: RiskThresholds,
    #[schema(value_type = Object)]
    pub high: RiskThresholds,
    #[schema(value_type = Object)]
    pub critical: RiskThresholds,
    /// Below this volume, the rates were not judged.
    pub min_payments: u64,
}
