//! The catalog's recurrence: how often a recurring price, and a subscription of it, bills.

text_enum! {
    /// How often a recurring price (and a subscription of it) bills.
    pub enum Interval {
        Day = "day",
        Week = "week",
        Month = "month",
        Year = "year",
    }
}

impl Interval {
    /// The most `interval_count` may be: a year in all.
    pub fn max_count(self) -> i64 {
        match self {
            Interval::Day => 365,
            Interval::Week => 52,
            Interval::Month => 12,
            Interval::Year => 1,
        }
    }
}
