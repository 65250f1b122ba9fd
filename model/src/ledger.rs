//! A shop's book entry: its bucket and what moved the money; the rules are
//! `payd::ledger::machine`.

text_enum! {
    /// Where an entry's money is: spendable, or held for a payout in flight.
    pub enum Bucket {
        Available = "available",
        Pending = "pending",
    }
}

text_enum! {
    /// What moved the money.
    pub enum Kind {
        /// Funds captured (available at once in the sandbox: no settlement delay, no fees).
        Capture = "capture",
        /// A refund made or pending (it holds its amount until it fails).
        Refund = "refund",
        /// A refund that failed gives its amount back.
        RefundFailure = "refund_failure",
        /// A capture cancelled afterwards gives the buyer what was left.
        CaptureCancel = "capture_cancel",
        /// A dispute lost, accepted or expired: the buyer keeps its amount.
        Dispute = "dispute",
        /// A payout's reservation (out of available, into pending) and its departure.
        Payout = "payout",
        /// A payout that failed or was cancelled after its reservation: back to available.
        PayoutRelease = "payout_release",
        /// A paid payout returned by the bank.
        PayoutReversal = "payout_reversal",
    }
}
