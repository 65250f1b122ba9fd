//! A processor account's kind and its approval by the operator.

text_enum! {
    /// What a processor account connects to: the sandbox, a processor speaking payd's
    /// protocol, or a Stripe account.
    pub enum AccountKind {
        Sandbox = "sandbox",
        Remote = "remote",
        Stripe = "stripe",
    }
}

text_enum! {
    /// `pending` until the operator decides (with `processors.require_operator_approval` on),
    /// then `approved` or `rejected`. Only an approved account is routed to or heard from.
    pub enum Approval {
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
    }
}
