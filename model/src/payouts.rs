//! A payout's status (Hyperswitch's names); its machine is `payd::payouts::machine`.

text_enum! {
    pub enum Status {
        RequiresCreation = "requires_creation",
        RequiresConfirmation = "requires_confirmation",
        RequiresPayoutMethodData = "requires_payout_method_data",
        RequiresFulfillment = "requires_fulfillment",
        Initiated = "initiated",
        Pending = "pending",
        Success = "success",
        Failed = "failed",
        Cancelled = "cancelled",
        Expired = "expired",
        Reversed = "reversed",
        Ineligible = "ineligible",
    }
}

impl Status {
    /// Nothing changes it any more (a `success` can still be reversed by the bank).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Failed
                | Status::Cancelled
                | Status::Expired
                | Status::Reversed
                | Status::Ineligible
        )
    }

    /// The event that announces it, if any.
    pub fn event(self) -> Option<&'static str> {
        Some(match self {
            Status::Initiated => "payout_initiated",
            Status::Pending => "payout_processing",
            Status::Success => "payout_success",
            Status::Failed | Status::Ineligible => "payout_failed",
            Status::Cancelled => "payout_cancelled",
            Status::Expired => "payout_expired",
            Status::Reversed => "payout_reversed",
            Status::RequiresCreation
            | Status::RequiresConfirmation
            | Status::RequiresPayoutMethodData
            | Status::RequiresFulfillment => return None,
        })
    }

    /// Whether its amount is held out of the available balance.
    pub fn holds_funds(self) -> bool {
        matches!(
            self,
            Status::RequiresFulfillment | Status::Initiated | Status::Pending
        )
    }
}

/// A destination as kept and shown: masked.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct Destination {
    /// `bank_account` or `card`.
    #[serde(rename = "type")]
    pub kind: String,
    pub last4: String,
    #[serde(default)]
    pub holder_name: Option<String>,
    #[serde(default)]
    pub routing_number: Option<String>,
    #[serde(default)]
    pub sort_code: Option<String>,
    #[serde(default)]
    pub exp_month: Option<u32>,
    #[serde(default)]
    pub exp_year: Option<u32>,
}
