//! A mandate's status and type.

text_enum! {
    pub enum Status {
        /// Filtered on, never written: a mandate is made active.
        Pending = "pending",
        Active = "active",
        /// Spent (single use) or ended.
        Inactive = "inactive",
        Revoked = "revoked",
    }
}

text_enum! {
    /// Whether the mandate is spent by its first charge.
    pub enum Kind {
        SingleUse = "single_use",
        MultiUse = "multi_use",
    }
}
