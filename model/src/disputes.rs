//! A dispute's status and stage; its machine is `payd::disputes::machine`.

text_enum! {
    pub enum Status {
        Opened = "opened",
        Challenged = "challenged",
        Won = "won",
        Lost = "lost",
        Accepted = "accepted",
        Expired = "expired",
        Cancelled = "cancelled",
    }
}

impl Status {
    /// Open disputes hold the payment: no refund while one is open.
    pub fn is_open(self) -> bool {
        matches!(self, Status::Opened | Status::Challenged)
    }

    /// The buyer kept the money: the dispute's amount is gone from what can be refunded.
    pub fn buyer_kept(self) -> bool {
        matches!(self, Status::Lost | Status::Accepted | Status::Expired)
    }

    /// The event announcing that a dispute reached this status.
    pub fn event(self) -> &'static str {
        match self {
            Status::Opened => "dispute_opened",
            Status::Challenged => "dispute_challenged",
            Status::Won => "dispute_won",
            Status::Lost => "dispute_lost",
            Status::Accepted => "dispute_accepted",
            Status::Expired => "dispute_expired",
            Status::Cancelled => "dispute_cancelled",
        }
    }
}

text_enum! {
    /// Ordered: `pre_dispute < dispute < pre_arbitration < arbitration`.
    #[derive(PartialOrd, Ord)]
    pub enum Stage {
        PreDispute = "pre_dispute",
        Dispute = "dispute",
        PreArbitration = "pre_arbitration",
        Arbitration = "arbitration",
    }
}

text_enum! {
    /// What a file attached to a dispute shows.
    pub enum EvidenceType {
        Receipt = "receipt",
        ShippingDocumentation = "shipping_documentation",
        CustomerCommunication = "customer_communication",
        RefundPolicy = "refund_policy",
        CancellationPolicy = "cancellation_policy",
        ServiceDocumentation = "service_documentation",
        Uncategorized = "uncategorized",
    }
}
