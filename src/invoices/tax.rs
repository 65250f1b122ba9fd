//! Tax rules and their evaluation: which rule applies to a line, and what it adds. Pure: the
//! same function answers `POST /invoice-settings/tax-rules/evaluate`, a draft's preview and
//! finalize.
//!
//! Precedence, most specific first: a rule for the line's `tax_category` (the shop's, then
//! the merchant's) → the shop's general rule → the merchant's general rule; at each step a
//! rule for the buyer's region beats one for the whole country. Two rules of one set that
//! could both apply at one moment (same country, region and category, overlapping validity)
//! are a tie, refused when the set is saved ([`check_set`]), so evaluation never meets one.

use chrono::{DateTime, Utc};

use crate::money::round_half_even;

/// Whose rule it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Owner {
    Merchant,
    Shop,
}

impl Owner {
    pub fn as_str(self) -> &'static str {
        match self {
            Owner::Merchant => "merchant",
            Owner::Shop => "shop",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub id: String,
    pub owner: Owner,
    pub rate_bps: i64,
    /// ISO 3166-1 alpha-2, upper case.
    pub country: String,
    pub region: Option<String>,
    pub tax_category: Option<String>,
    pub inclusive: bool,
    pub valid_from: Option<DateTime<Utc>>,
    pub valid_until: Option<DateTime<Utc>>,
}

/// Where the buyer is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    pub country: Option<String>,
    pub region: Option<String>,
}

/// What a rule (or none) makes of one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The rule's id; `None` when no rule applies (no tax).
    pub rule_id: Option<String>,
    pub owner: Option<Owner>,
    pub rate_bps: i64,
    pub inclusive: bool,
    pub amounts: Amounts,
}

/// A line's amounts in minor units: before tax, the tax, and both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Amounts {
    pub net: i64,
    pub tax: i64,
    pub total: i64,
}

/// Highest rate a rule may have (100 %).
pub const MAX_RATE_BPS: i64 = 10_000;

/// Two rules of one set that could both apply at one moment: their positions in the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tie(pub usize, pub usize);

/// Refuses a set in which two rules could both apply to one line at one moment.
pub fn check_set(rules: &[Rule]) -> Result<(), Tie> {
    for (i, a) in rules.iter().enumerate() {
        for (j, b) in rules.iter().enumerate().skip(i + 1) {
            let same_place =
                a.country == b.country && a.region == b.region && a.tax_category == b.tax_category;
            if same_place && overlap(a, b) {
                return Err(Tie(i, j));
            }
        }
    }
    Ok(())
}

/// Whether two validity windows (`valid_until` exclusive) share a moment.
fn overlap(a: &Rule, b: &Rule) -> bool {
    let starts_before_end =
        |start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>| match (start, end) {
            (Some(s), Some(e)) => s < e,
            _ => true,
        };
    starts_before_end(a.valid_from, b.valid_until) && starts_before_end(b.valid_from, a.valid_until)
}

fn valid_at(r: &Rule, at: DateTime<Utc>) -> bool {
    r.valid_from.is_none_or(|f| f <= at) && r.valid_until.is_none_or(|u| at < u)
}

/// The rule for a line of `category` sold at `at` to a buyer at `place`, among the shop's and
/// the merchant's rules; `None`: no rule, no tax.
pub fn choose<'r>(
    rules: &'r [Rule],
    place: &Place,
    category: Option<&str>,
    at: DateTime<Utc>,
) -> Option<&'r Rule> {
    let country = place.country.as_deref()?;
    rules
        .iter()
        .filter(|r| valid_at(r, at) && r.country == country)
        .filter(|r| r.region.is_none() || r.region.as_deref() == place.region.as_deref())
        .filter(|r| r.tax_category.is_none() || r.tax_category.as_deref() == category)
        // The most specific: category, then owner, then region.
        .max_by_key(|r| (r.tax_category.is_some(), r.owner, r.region.is_some()))
}

/// What `rule` makes of a line whose quantity × unit amount is `amount` (net when the rule is
/// exclusive, tax included when it is inclusive); `None`: no tax. Tax is rounded half to even
/// to the minor unit. `None` if the total overflows.
pub fn apply(amount: i64, rule: Option<&Rule>) -> Option<Applied> {
    let Some(rule) = rule else {
        return Some(Applied {
            rule_id: None,
            owner: None,
            rate_bps: 0,
            inclusive: false,
            amounts: Amounts {
                net: amount,
                tax: 0,
                total: amount,
            },
        });
    };
    let rate = i128::from(rule.rate_bps);
    let amounts = if rule.inclusive {
        let tax = round_half_even(i128::from(amount) * rate, 10_000 + rate);
        Amounts {
            net: amount - tax,
            tax,
            total: amount,
        }
    } else {
        let tax = round_half_even(i128::from(amount) * rate, 10_000);
        Amounts {
            net: amount,
            tax,
            total: amount.checked_add(tax)?,
        }
    };
    Some(Applied {
        rule_id: Some(rule.id.clone()),
        owner: Some(rule.owner),
        rate_bps: rule.rate_bps,
        inclusive: rule.inclusive,
        amounts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str, owner: Owner, rate: i64) -> Rule {
        Rule {
            id: id.into(),
            owner,
            rate_bps: rate,
            country: "DE".into(),
            region: None,
            tax_category: None,
            inclusive: false,
            valid_from: None,
            valid_until: None,
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn de(region: Option<&str>) -> Place {
        Place {
            country: Some("DE".into()),
            region: region.map(Into::into),
        }
    }

    #[test]
    fn half_even_rounds_ties_to_even() {
        assert_eq!(round_half_even(25, 10), 2);
        assert_eq!(round_half_even(35, 10), 4);
        assert_eq!(round_half_even(26, 10), 3);
        assert_eq!(round_half_even(24, 10), 2);
        assert_eq!(round_half_even(0, 7), 0);
        // 19 % of 0.50 is 9.5 cents → 10 (even); of 0.10 it is 1.9 → 2.
        assert_eq!(round_half_even(50 * 1900, 10_000), 10);
        assert_eq!(round_half_even(250 * 1000, 10_000), 25);
        assert_eq!(round_half_even(5 * 1000, 10_000), 0); // 0.5 → 0
        assert_eq!(round_half_even(15 * 1000, 10_000), 2); // 1.5 → 2
    }

    #[test]
    fn exclusive_adds_and_inclusive_extracts() {
        let mut r = rule("tax_1", Owner::Merchant, 1900);
        let a = apply(10_000, Some(&r)).unwrap().amounts;
        assert_eq!((a.net, a.tax, a.total), (10_000, 1_900, 11_900));
        r.inclusive = true;
        let a = apply(11_900, Some(&r)).unwrap().amounts;
        assert_eq!((a.net, a.tax, a.total), (10_000, 1_900, 11_900));
        // 1.00 incl. 19 %: 100 × 1900 / 11900 = 15.966… → 16.
        let a = apply(100, Some(&r)).unwrap().amounts;
        assert_eq!((a.net, a.tax, a.total), (84, 16, 100));
        let none = apply(500, None).unwrap();
        assert_eq!((none.rate_bps, none.amounts.tax), (0, 0));
    }

    #[test]
    fn category_then_shop_then_merchant_then_region() {
        let merchant = rule("m", Owner::Merchant, 1900);
        let shop = rule("s", Owner::Shop, 1600);
        let mut merchant_books = rule("mb", Owner::Merchant, 700);
        merchant_books.tax_category = Some("books".into());
        let mut shop_region = rule("sr", Owner::Shop, 1000);
        shop_region.region = Some("BY".into());
        let now = at("2026-01-01T00:00:00Z");
        let rules = vec![
            merchant.clone(),
            shop.clone(),
            merchant_books.clone(),
            shop_region,
        ];
        let pick = |place: &Place, cat: Option<&str>| {
            choose(&rules, place, cat, now).map(|r| r.id.clone())
        };
        assert_eq!(pick(&de(None), Some("books")).as_deref(), Some("mb"));
        assert_eq!(pick(&de(Some("BY")), None).as_deref(), Some("sr"));
        assert_eq!(pick(&de(None), None).as_deref(), Some("s"));
        assert_eq!(pick(&de(None), Some("food")).as_deref(), Some("s"));
        let only_merchant = [merchant];
        assert_eq!(
            choose(&only_merchant, &de(None), None, now).map(|r| r.id.as_str()),
            Some("m")
        );
        let fr = Place {
            country: Some("FR".into()),
            region: None,
        };
        assert!(choose(&rules, &fr, None, now).is_none());
        assert!(choose(&rules, &Place::default(), None, now).is_none());
    }

    #[test]
    fn validity_windows_pick_and_ties_are_refused() {
        let mut old = rule("old", Owner::Merchant, 1600);
        old.valid_until = Some(at("2026-01-01T00:00:00Z"));
        let mut new = rule("new", Owner::Merchant, 1900);
        new.valid_from = Some(at("2026-01-01T00:00:00Z"));
        let rules = vec![old.clone(), new.clone()];
        assert_eq!(check_set(&rules), Ok(()));
        let pick = |t: &str| choose(&rules, &de(None), None, at(t)).map(|r| r.id.clone());
        assert_eq!(pick("2025-12-31T23:59:59Z").as_deref(), Some("old"));
        assert_eq!(pick("2026-01-01T00:00:00Z").as_deref(), Some("new"));
        new.valid_from = Some(at("2025-12-01T00:00:00Z"));
        assert_eq!(check_set(&[old.clone(), new]), Err(Tie(0, 1)));
        let mut books = old.clone();
        books.tax_category = Some("books".into());
        assert_eq!(check_set(&[old.clone(), books]), Ok(()));
        assert_eq!(check_set(&[old.clone(), old]), Err(Tie(0, 1)));
    }
}
