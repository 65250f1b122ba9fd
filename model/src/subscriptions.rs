//! A subscription's and its cycle's statuses; the machine is `payd::subscriptions::machine`.

text_enum! {
    pub enum Status {
        Created = "created",
        Active = "active",
        Paused = "paused",
        Unpaid = "unpaid",
        Cancelled = "cancelled",
        InActive = "in_active",
    }
}

impl Status {
    /// Nothing leads out of a final status.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Cancelled | Status::InActive)
    }
}

text_enum! {
    /// A billing cycle: open until its attempt is paid, or void when it no longer bills.
    pub enum CycleStatus {
        Open = "open",
        Paid = "paid",
        Void = "void",
    }
}

text_enum! {
    /// A subscription at the sandbox billing processor.
    pub enum ProcessorStatus {
        Active = "active",
        Paused = "paused",
        Cancelled = "cancelled",
    }
}

text_enum! {
    /// An invoice of the sandbox billing processor: collected, or its collection failed.
    pub enum ProcessorInvoiceStatus {
        Paid = "paid",
        Failed = "failed",
    }
}

text_enum! {
    /// Who bills a subscription: payd, charging each cycle itself, or the billing processor
    /// that collects its cycles.
    pub enum Biller {
        Payd = "payd",
        BillingSandbox = "billing_sandbox",
    }
}
