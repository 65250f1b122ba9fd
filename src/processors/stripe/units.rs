//! Stripe's unit for each currency, and the conversion of payd's amounts (ISO 4217 minor
//! units) to Stripe's and back (docs.stripe.com/currencies, "Minor units in API amounts",
//! "Zero-decimal currencies", "Three-decimal currencies", "Special cases").
//!
//! Stripe's API counts most currencies in hundredths, as ISO 4217 does, but not all:
//! - zero-decimal currencies are counted in whole units; all of them are zero-decimal in ISO
//!   4217 too, except the Malagasy ariary (MGA, two decimals in ISO 4217, none at Stripe);
//! - the Icelandic króna (ISK) is zero-decimal in ISO 4217, yet Stripe keeps it two-decimal
//!   for backwards compatibility, its decimals always `00`: 5 kr is `amount=500`;
//! - three-decimal currencies are counted in thousandths, as in ISO 4217, but the last digit
//!   must be 0 for Stripe's payment partners;
//! - HUF and TWD are zero-decimal at Stripe for payouts only, and UGX for payouts is counted
//!   in hundredths: payd makes no Stripe payouts, so for charges and refunds they follow the
//!   rules above (HUF and TWD two-decimal as in ISO 4217, UGX zero-decimal).
//!
//! An amount Stripe cannot represent is refused, never rounded: rounding would charge or
//! refund another sum than the one payd records.

/// Stripe counts these in whole units.
const ZERO_DECIMAL: [&str; 16] = [
    "BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV",
    "XAF", "XOF", "XPF",
];
/// Stripe counts these in thousandths, the last digit 0.
const THREE_DECIMAL: [&str; 5] = ["BHD", "JOD", "KWD", "OMR", "TND"];

/// How many decimals Stripe's amounts have in `currency` (upper case).
fn stripe_decimals(currency: &str) -> u32 {
    if ZERO_DECIMAL.contains(&currency) {
        0
    } else if THREE_DECIMAL.contains(&currency) {
        3
    } else {
        2
    }
}

/// How many decimals payd's amounts (ISO 4217 minor units) have in `currency`.
fn iso_decimals(currency: &str) -> u32 {
    iso_currency::Currency::from_code(currency)
        .and_then(|c| c.exponent())
        .map_or(2, u32::from)
}

/// Why an amount cannot go to Stripe as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unrepresentable(pub String);

/// payd's `amount` of `currency` in Stripe's unit, or why Stripe cannot take it.
pub fn to_stripe(amount: i64, currency: &str) -> Result<i64, Unrepresentable> {
    let currency = currency.to_ascii_uppercase();
    let (ours, theirs) = (iso_decimals(&currency), stripe_decimals(&currency));
    let stripe = if theirs >= ours {
        amount
            .checked_mul(10i64.pow(theirs - ours))
            .ok_or_else(|| {
                Unrepresentable(format!("{amount} {currency} is too large for Stripe"))
            })?
    } else {
        let unit = 10i64.pow(ours - theirs);
        if amount % unit != 0 {
            return Err(Unrepresentable(format!(
                "Stripe takes {currency} in whole units only: the amount must be a multiple of {unit} minor units"
            )));
        }
        amount / unit
    };
    if theirs == 3 && stripe % 10 != 0 {
        return Err(Unrepresentable(format!(
            "Stripe takes {currency} amounts whose last digit is 0 (a multiple of 10 minor units)"
        )));
    }
    Ok(stripe)
}

/// Stripe's `amount` of `currency` (as Stripe spells it, any case) in payd's minor units.
/// Stripe's amounts are always whole in payd's units, but for an ISK amount with
/// decimals, which Stripe never makes: its fraction is dropped.
pub fn from_stripe(amount: i64, currency: &str) -> i64 {
    let currency = currency.to_ascii_uppercase();
    let (ours, theirs) = (iso_decimals(&currency), stripe_decimals(&currency));
    if theirs >= ours {
        amount / 10i64.pow(theirs - ours)
    } else {
        amount.saturating_mul(10i64.pow(ours - theirs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both_ways(amount: i64, currency: &str, stripe: i64) {
        assert_eq!(
            to_stripe(amount, currency),
            Ok(stripe),
            "{amount} {currency}"
        );
        assert_eq!(from_stripe(stripe, currency), amount, "{stripe} {currency}");
    }

    #[test]
    fn two_decimal_currencies_go_unchanged() {
        both_ways(1050, "USD", 1050);
        both_ways(1050, "eur", 1050);
        // HUF and TWD: zero-decimal at Stripe for payouts only.
        both_ways(12345, "HUF", 12345);
        both_ways(80001, "TWD", 80001);
    }

    #[test]
    fn zero_decimal_currencies_that_are_zero_decimal_in_iso_go_unchanged() {
        for currency in [
            "BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "VND", "VUV",
            "XAF", "XOF", "XPF",
        ] {
            both_ways(5001, currency, 5001);
        }
    }

    #[test]
    fn the_ariary_is_whole_at_stripe() {
        // MGA 100.00 is 100 Ar at Stripe, not 10 000.
        both_ways(10_000, "MGA", 100);
        assert!(to_stripe(10_050, "MGA").is_err(), "never rounded");
    }

    #[test]
    fn the_krona_is_two_decimal_at_stripe() {
        // ISK 5 000 is amount=500000: Stripe would read 5000 as 50 kr.
        both_ways(5_000, "ISK", 500_000);
        assert_eq!(from_stripe(500_050, "ISK"), 5_000);
    }

    #[test]
    fn three_decimal_currencies_end_in_zero() {
        for currency in ["BHD", "JOD", "KWD", "OMR", "TND"] {
            both_ways(1_010, currency, 1_010);
            let refused = to_stripe(1_005, currency).unwrap_err();
            assert!(refused.0.contains("last digit"), "{refused}");
        }
    }

    #[test]
    fn an_amount_too_large_is_refused_not_wrapped() {
        assert!(to_stripe(i64::MAX, "ISK").is_err());
    }
}
