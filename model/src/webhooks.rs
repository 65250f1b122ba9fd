//! A webhook delivery attempt: what started it, and why it did not deliver.

text_enum! {
    pub enum AttemptTrigger {
        /// A delivery's first attempt.
        Initial = "initial",
        /// A retry on the schedule.
        Automatic = "automatic",
        /// Asked for through the API (`…/retry`, a replay).
        Manual = "manual",
    }
}

text_enum! {
    /// Why an attempt did not deliver.
    pub enum ErrorKind {
        Timeout = "timeout",
        Network = "network",
        /// The address is not one payd may reach (`outbound`).
        BlockedAddress = "blocked_address",
        /// 401 or 403.
        Auth = "auth",
        /// Another 4xx: final.
        Rejected = "rejected",
        /// 5xx, 408, 429.
        Transient = "transient",
    }
}

text_enum! {
    /// Why an endpoint is disabled: payd disabled it after failing too long, or its shop's
    /// keys paused it.
    pub enum DisabledReason {
        Failing = "failing",
        Merchant = "merchant",
    }
}

text_enum! {
    /// A delivery of one event to one endpoint: `pending` until delivered, or failed for good
    /// (retries ran out); `paused` while its endpoint is disabled.
    pub enum DeliveryStatus {
        Pending = "pending",
        Delivered = "delivered",
        Failed = "failed",
        Paused = "paused",
    }
}
