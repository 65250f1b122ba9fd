//! An `Idempotency-Key`'s state.

text_enum! {
    /// `in_flight` while its request has no stored answer (taken over once its lock lapses),
    /// then `completed`: the answer is replayed.
    pub enum KeyState {
        InFlight = "in_flight",
        Completed = "completed",
    }
}
