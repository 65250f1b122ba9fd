//! Money's arithmetic: the rounding rules, each named where it is used, so a rule is chosen on
//! purpose and never by where the code happens to live. Amounts are integers in the currency's
//! minor unit; a share is computed in `i128` and rounded once.
//!
//! - [`round_half_even`]: tax (a line's tax, a credit note's share of it);
//! - [`round_half_up`]: prorations of a subscription's plan change;
//! - [`unit_share`]: some units of a line (a refund's or a credit note's), rounded down on the
//!   cumulative count of units, so the last unit takes what rounding left: one unit of one
//!   line gives back the same amount whether it is refunded or credited;
//! - [`largest_remainder`]: an amount spread over lines (a captured amount over a payment's
//!   lines, a credit note's amount over an invoice's lines): the shares add up exactly.
//!
//! [`Money`] is an amount with its currency, for the sums that gather amounts of objects that
//! each have their own currency (a subscription's items, priced by the catalog): adding two
//! currencies is an error, never a number.

/// `n / d` rounded half to even, for `n ≥ 0` and `d > 0` whose quotient fits an `i64`.
pub fn round_half_even(n: i128, d: i128) -> i64 {
    let (q, r) = (n / d, n % d);
    let q = match (2 * r).cmp(&d) {
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal if q % 2 == 1 => q + 1,
        _ => q,
    };
    i64::try_from(q).unwrap_or(i64::MAX)
}

/// `n / d` rounded half up (away from zero for `n ≥ 0`), for `d > 0`.
pub fn round_half_up(n: i128, d: i128) -> i64 {
    i64::try_from((2 * n + d) / (2 * d)).unwrap_or(i64::MAX)
}

/// `n / d` rounded down (toward zero), for `d > 0`.
pub fn round_down(n: i128, d: i128) -> i64 {
    i64::try_from(n / d).unwrap_or(i64::MAX)
}

/// The share of `whole` (a line's amount, or its tax) that `n` more units of a line of
/// `quantity` units carry when `done` were taken before: `⌊whole × (done + n) / quantity⌋`
/// less `⌊whole × done / quantity⌋`. The shares of the units, taken in any groups, add up to
/// `whole` exactly, and the last unit takes what rounding left. A quantity below 1 counts as 1.
pub fn unit_share(whole: i64, quantity: i64, done: i64, n: i64) -> i64 {
    let cumulative = |units: i64| {
        round_down(
            i128::from(whole) * i128::from(units),
            i128::from(quantity.max(1)),
        )
    };
    cumulative(done.saturating_add(n)) - cumulative(done)
}

/// `amount` spread over `weights` in proportion (largest remainder: each share rounded down,
/// then one more minor unit to the largest remainders, ties to the first): the shares add up
/// to `amount` exactly, and with weights ≥ 0 none passes its weight while
/// `0 ≤ amount ≤ Σ weights`. Weights that add up to 0 or less: every share is 0.
pub fn largest_remainder(amount: i64, weights: &[i64]) -> Vec<i64> {
    let weights: Vec<i128> = weights.iter().map(|w| i128::from(*w)).collect();
    let all: i128 = weights.iter().sum();
    if all <= 0 {
        return vec![0; weights.len()];
    }
    let a = i128::from(amount);
    let exact: Vec<(i128, i128)> = weights.iter().map(|w| (a * w / all, a * w % all)).collect();
    let mut shares: Vec<i64> = exact.iter().map(|(q, _)| *q as i64).collect();
    let mut left = amount - shares.iter().sum::<i64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|x, y| exact[*y].1.cmp(&exact[*x].1).then(x.cmp(y)));
    for i in order {
        if left == 0 {
            break;
        }
        shares[i] += 1;
        left -= 1;
    }
    debug_assert!(
        weights.iter().any(|w| *w < 0) || shares.iter().sum::<i64>() == amount,
        "the shares add up"
    );
    shares
}

/// An amount in a currency's minor unit (`currency`: an ISO 4217 code, as checked at the edge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Money {
    pub minor: i64,
    pub currency: String,
}

/// Why two amounts do not add up to one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("{0} and {1} are not one currency")]
    Currencies(String, String),
    #[error("the amount overflows")]
    Overflow,
}

impl Money {
    pub fn new(minor: i64, currency: &str) -> Self {
        Self {
            minor,
            currency: currency.to_owned(),
        }
    }

    /// The sum, in the one currency both are in.
    pub fn plus(&self, other: &Money) -> Result<Money, MoneyError> {
        if self.currency != other.currency {
            return Err(MoneyError::Currencies(
                self.currency.clone(),
                other.currency.clone(),
            ));
        }
        let minor = self.minor.checked_add(other.minor);
        minor
            .map(|minor| Money::new(minor, &self.currency))
            .ok_or(MoneyError::Overflow)
    }

    /// `n` times this amount (a unit price times a quantity).
    pub fn times(&self, n: i64) -> Result<Money, MoneyError> {
        let minor = self.minor.checked_mul(n);
        minor
            .map(|minor| Money::new(minor, &self.currency))
            .ok_or(MoneyError::Overflow)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn each_rule_rounds_a_tie_its_own_way() {
        // 2.5 and 3.5 minor units.
        assert_eq!((round_half_even(5, 2), round_half_even(7, 2)), (2, 4));
        assert_eq!((round_half_up(5, 2), round_half_up(7, 2)), (3, 4));
        assert_eq!((round_down(5, 2), round_down(7, 2)), (2, 3));
        assert_eq!(round_half_even(26, 10), 3);
        assert_eq!(round_half_up(24, 10), 2);
    }

    #[test]
    fn remainders_go_to_the_largest_then_the_first() {
        assert_eq!(largest_remainder(100, &[1, 1, 1]), vec![34, 33, 33]);
        assert_eq!(largest_remainder(10, &[3, 0, 7]), vec![3, 0, 7]);
        assert_eq!(largest_remainder(5, &[0, -2]), vec![0, 0]);
        assert_eq!(largest_remainder(6, &[]), Vec::<i64>::new());
        assert_eq!(largest_remainder(0, &[4, 5]), vec![0, 0]);
    }

    #[test]
    fn a_unit_takes_its_share_rounded_down_and_the_last_takes_the_rest() {
        // 3 units of 335 with 2 of tax: 1 007 in all.
        assert_eq!(unit_share(1007, 3, 0, 1), 335);
        assert_eq!(unit_share(1007, 3, 1, 1), 336);
        assert_eq!(unit_share(1007, 3, 2, 1), 336);
        assert_eq!(unit_share(1007, 3, 0, 2), 671);
        assert_eq!(unit_share(2, 3, 0, 1), 0);
        assert_eq!(unit_share(2, 3, 0, 3), 2);
        assert_eq!(unit_share(7, 0, 0, 0), 0);
    }

    #[test]
    fn money_adds_up_only_in_one_currency() {
        let eur = |m| Money::new(m, "EUR");
        assert_eq!(
            eur(250).times(3).and_then(|m| m.plus(&eur(50))),
            Ok(eur(800))
        );
        assert_eq!(
            eur(1).plus(&Money::new(1, "USD")),
            Err(MoneyError::Currencies("EUR".into(), "USD".into()))
        );
        assert_eq!(eur(i64::MAX).plus(&eur(1)), Err(MoneyError::Overflow));
        assert_eq!(eur(i64::MAX / 2 + 1).times(2), Err(MoneyError::Overflow));
    }

    proptest! {
        /// Units taken in any groups add up to the whole; a line's amount `q × unit + tax`
        /// gives `q × unit` plus the tax's own share, so the rule reads the same on a line's
        /// total as on its tax.
        #[test]
        fn unit_shares_add_up_in_any_groups(
            unit in 0i64..100_000,
            tax in 0i64..100_000,
            groups in proptest::collection::vec(1i64..5, 1..8),
        ) {
            let quantity: i64 = groups.iter().sum();
            let whole = unit * quantity + tax;
            let mut done = 0;
            let mut sum = 0;
            for n in &groups {
                let share = unit_share(whole, quantity, done, *n);
                prop_assert_eq!(share, unit * n + unit_share(tax, quantity, done, *n));
                sum += share;
                done += n;
            }
            prop_assert_eq!(sum, whole);
        }

        #[test]
        fn shares_add_up_and_stay_within_their_weights(
            weights in proptest::collection::vec(0i64..1_000_000, 1..12),
            cut in 0u32..=100,
        ) {
            let all: i64 = weights.iter().sum();
            let amount = all * i64::from(cut) / 100;
            let shares = largest_remainder(amount, &weights);
            prop_assert_eq!(shares.iter().sum::<i64>(), if all == 0 { 0 } else { amount });
            for (s, w) in shares.iter().zip(&weights) {
                prop_assert!(*s >= 0 && s <= w);
            }
        }
    }
}
