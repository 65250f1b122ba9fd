//! A refund's status as payd stores it (the processor's answer is `payd::processors::RefundStatus`).

text_enum! {
    pub enum Status {
        /// Asked of the processor, not yet answered as final.
        Pending = "pending",
        /// Held by the processor for review (read, never written by payd itself).
        ManualReview = "manual_review",
        Succeeded = "succeeded",
        Failed = "failed",
    }
}

impl Status {
    /// Still waiting for the processor's last word: its amount is held from what else can be
    /// refunded.
    pub fn is_open(self) -> bool {
        matches!(self, Status::Pending | Status::ManualReview)
    }
}

/// A refund's share of one line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct LineRefund {
    pub line_id: String,
    pub quantity: i64,
    pub amount: i64,
}
