//! A shop's risk band, pure: the rates its counts give, the band they reach under the
//! thresholds, and whether a new assessment escalates the one before it.
//!
//! ```text
//! low ──▶ elevated ──▶ high ──▶ critical      (a rise between two consecutive
//!  ▲          │          │          │          assessments: shop_risk_band_escalated)
//!  └──────────┴──────────┴──────────┘          (a fall, or the same band: no event)
//! ```

use crate::settings::{RiskSettings, RiskThresholds};

/// The bands, lowest first (their order is their severity).
pub use payd_model::risk::Band;

/// What a shop did in the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// The volume, the rates' denominator: payments authorized plus attempts declined (so
    /// `declines` ≤ `payments` and no rate of declines exceeds 1).
    pub payments: i64,
    /// Attempts the processor declined.
    pub declines: i64,
    pub refunds: i64,
    pub disputes: i64,
}

/// The rates of `Counts`, each 0 when there was no payment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub dispute_rate: f64,
    pub refund_rate: f64,
    pub decline_rate: f64,
}

impl Counts {
    pub fn rates(&self) -> Rates {
        let of = |n: i64| {
            if self.payments > 0 {
                n as f64 / self.payments as f64
            } else {
                0.0
            }
        };
        Rates {
            dispute_rate: of(self.disputes),
            refund_rate: of(self.refunds),
            decline_rate: of(self.declines),
        }
    }
}

fn reaches(rates: &Rates, t: &RiskThresholds) -> bool {
    rates.dispute_rate >= t.dispute_rate
        || rates.refund_rate >= t.refund_rate
        || rates.decline_rate >= t.decline_rate
}

/// The highest band any rate reaches; `low` below `min_payments`.
pub fn band(counts: &Counts, settings: &RiskSettings) -> Band {
    if counts.payments < settings.min_payments as i64 {
        return Band::Low;
    }
    let rates = counts.rates();
    [
        (Band::Critical, &settings.critical),
        (Band::High, &settings.high),
        (Band::Elevated, &settings.elevated),
    ]
    .into_iter()
    .find(|(_, t)| reaches(&rates, t))
    .map_or(Band::Low, |(b, _)| b)
}

/// True exactly when `now` is above `previous` (a first assessment counts from `low`).
pub fn escalated(previous: Option<Band>, now: Band) -> bool {
    now > previous.unwrap_or(Band::Low)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RiskSettings {
        let t = |d, r, x| RiskThresholds {
            dispute_rate: d,
            refund_rate: r,
            decline_rate: x,
        };
        RiskSettings {
            assess_every: std::time::Duration::from_secs(3600),
            window: std::time::Duration::from_secs(86_400),
            min_payments: 10,
            elevated: t(0.05, 0.10, 0.25),
            high: t(0.10, 0.20, 0.40),
            critical: t(0.20, 0.35, 0.60),
        }
    }

    fn counts(payments: i64, declines: i64, refunds: i64, disputes: i64) -> Counts {
        Counts {
            payments,
            declines,
            refunds,
            disputes,
        }
    }

    #[test]
    fn the_highest_band_any_rate_reaches() {
        let s = settings();
        assert_eq!(band(&counts(100, 0, 0, 0), &s), Band::Low);
        assert_eq!(band(&counts(100, 0, 0, 5), &s), Band::Elevated);
        assert_eq!(band(&counts(100, 0, 20, 5), &s), Band::High);
        assert_eq!(band(&counts(100, 60, 0, 0), &s), Band::Critical);
        assert_eq!(band(&counts(100, 0, 9, 4), &s), Band::Low);
    }

    #[test]
    fn too_few_payments_are_not_judged() {
        let s = settings();
        assert_eq!(band(&counts(9, 9, 9, 9), &s), Band::Low);
        assert_eq!(band(&counts(0, 0, 0, 0), &s), Band::Low);
        assert_eq!(counts(0, 0, 0, 3).rates().dispute_rate, 0.0);
    }

    #[test]
    fn only_a_rise_escalates() {
        assert!(escalated(None, Band::Elevated));
        assert!(!escalated(None, Band::Low));
        assert!(escalated(Some(Band::Elevated), Band::Critical));
        assert!(!escalated(Some(Band::High), Band::High));
        assert!(!escalated(Some(Band::Critical), Band::Low));
    }

    #[test]
    fn names_round_trip() {
        for b in Band::ALL {
            assert_eq!(Band::parse(b.as_str()), Some(b));
        }
        assert_eq!(Band::parse("severe"), None);
    }
}
