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
