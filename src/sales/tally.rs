//! The sales report of a product, pure: what its payment lines sold (their captured share)
//! and what line refunds gave back, per price and per day, within a time window.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// A payment line of the product, as captured.
#[derive(Debug, Clone)]
pub struct Sold {
    pub price_id: Option<String>,
    pub quantity: i64,
    /// The line's total.
    pub amount: i64,
    /// Its share of what the payment captured (never more than `amount`).
    pub captured: i64,
    /// When the payment was first captured; none if nothing was.
    pub at: Option<DateTime<Utc>>,
}

/// A succeeded refund of one of the product's lines.
#[derive(Debug, Clone)]
pub struct Refunded {
    pub price_id: Option<String>,
    pub quantity: i64,
    pub amount: i64,
    pub at: DateTime<Utc>,
}

/// Units and amounts, sold and refunded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct Figures {
    pub units_sold: i64,
    pub amount_sold: i64,
    pub units_refunded: i64,
    pub amount_refunded: i64,
}

impl Figures {
    fn sold(&mut self, units: i64, amount: i64) {
        self.units_sold += units;
        self.amount_sold += amount;
    }

    fn refunded(&mut self, units: i64, amount: i64) {
        self.units_refunded += units;
        self.amount_refunded += amount;
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ByPrice {
    /// `null` for lines that name the product but no price.
    pub price_id: Option<String>,
    #[serde(flatten)]
    pub figures: Figures,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ByDay {
    /// The UTC day (`YYYY-MM-DD`): of the capture for sales, of the refund for refunds.
    pub date: NaiveDate,
    #[serde(flatten)]
    pub figures: Figures,
}

/// `GET /products/{product_id}/sales`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Report {
    pub product_id: String,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// One currency per report: the product's lines in other currencies are left out and
    /// counted here.
    pub currency: Option<String>,
    pub totals: Figures,
    pub by_price: Vec<ByPrice>,
    pub by_day: Vec<ByDay>,
}

/// The units a captured share stands for: all of them once the line is captured whole, else
/// the whole units the share pays for.
fn units(quantity: i64, amount: i64, captured: i64) -> i64 {
    if amount <= 0 || captured >= amount {
        return if captured > 0 || amount == 0 {
            quantity
        } else {
            0
        };
    }
    (i128::from(quantity) * i128::from(captured) / i128::from(amount)) as i64
}

fn within(at: DateTime<Utc>, from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> bool {
    from.is_none_or(|f| at >= f) && to.is_none_or(|t| at < t)
}

/// The report of the lines sold and refunded in `[from, to)`.
pub fn tally(
    product_id: &str,
    currency: Option<String>,
    sold: &[Sold],
    refunded: &[Refunded],
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
) -> Report {
    let mut totals = Figures::default();
    let mut by_price: BTreeMap<Option<String>, Figures> = BTreeMap::new();
    let mut by_day: BTreeMap<NaiveDate, Figures> = BTreeMap::new();
    for s in sold {
        let Some(at) = s.at.filter(|at| within(*at, from, to)) else {
            continue;
        };
        let captured = s.captured.min(s.amount);
        if captured <= 0 && s.amount > 0 {
            continue;
        }
        let u = units(s.quantity, s.amount, captured);
        totals.sold(u, captured);
        by_price
            .entry(s.price_id.clone())
            .or_default()
            .sold(u, captured);
        by_day.entry(at.date_naive()).or_default().sold(u, captured);
    }
    for r in refunded.iter().filter(|r| within(r.at, from, to)) {
        totals.refunded(r.quantity, r.amount);
        by_price
            .entry(r.price_id.clone())
            .or_default()
            .refunded(r.quantity, r.amount);
        by_day
            .entry(r.at.date_naive())
            .or_default()
            .refunded(r.quantity, r.amount);
    }
    Report {
        product_id: product_id.to_owned(),
        from,
        to,
        currency,
        totals,
        by_price: by_price
            .into_iter()
            .map(|(price_id, figures)| ByPrice { price_id, figures })
            .collect(),
        by_day: by_day
            .into_iter()
            .map(|(date, figures)| ByDay { date, figures })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use proptest::prelude::*;

    use super::*;

    fn day(d: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + Duration::days(d)
    }

    #[test]
    fn a_partial_capture_sells_the_units_it_pays_for_and_refunds_count_on_their_day() {
        let sold = [
            Sold {
                price_id: Some("price_a".into()),
                quantity: 4,
                amount: 4000,
                captured: 2500,
                at: Some(day(0)),
            },
            Sold {
                price_id: Some("price_b".into()),
                quantity: 1,
                amount: 500,
                captured: 500,
                at: Some(day(1)),
            },
            Sold {
                price_id: Some("price_b".into()),
                quantity: 1,
                amount: 500,
                captured: 0,
                at: None,
            },
        ];
        let refunded = [Refunded {
            price_id: Some("price_a".into()),
            quantity: 1,
            amount: 1000,
            at: day(2),
        }];
        let r = tally("prod_x", Some("EUR".into()), &sold, &refunded, None, None);
        assert_eq!(
            r.totals,
            Figures {
                units_sold: 3,
                amount_sold: 3000,
                units_refunded: 1,
                amount_refunded: 1000
            }
        );
        assert_eq!(r.by_price.len(), 2);
        assert_eq!(r.by_day.len(), 3);
        let windowed = tally("prod_x", None, &sold, &refunded, Some(day(1)), Some(day(2)));
        assert_eq!(
            windowed.totals,
            Figures {
                units_sold: 1,
                amount_sold: 500,
                units_refunded: 0,
                amount_refunded: 0
            }
        );
    }

    proptest! {
        /// The totals are the sums of the per-price and of the per-day figures, and nothing is
        /// sold beyond what was captured.
        #[test]
        fn the_parts_add_up(lines in prop::collection::vec((1i64..5, 1i64..5000, 0i64..6000, 0i64..5, 0usize..3), 0..20)) {
            let prices = ["price_a", "price_b", "price_c"];
            let sold: Vec<Sold> = lines.iter().map(|(q, a, c, d, p)| Sold {
                price_id: Some(prices[*p].into()), quantity: *q, amount: *a, captured: *c, at: Some(day(*d)),
            }).collect();
            let r = tally("prod", None, &sold, &[], None, None);
            let sum = |f: &dyn Fn(&Figures) -> i64, parts: Vec<Figures>| parts.iter().map(f).sum::<i64>();
            let prices_f: Vec<Figures> = r.by_price.iter().map(|b| b.figures).collect();
            let days_f: Vec<Figures> = r.by_day.iter().map(|b| b.figures).collect();
            prop_assert_eq!(sum(&|f| f.amount_sold, prices_f.clone()), r.totals.amount_sold);
            prop_assert_eq!(sum(&|f| f.units_sold, days_f.clone()), r.totals.units_sold);
            let captured: i64 = lines.iter().map(|(_, a, c, _, _)| (*c).min(*a)).sum();
            prop_assert_eq!(r.totals.amount_sold, captured);
            let units: i64 = lines.iter().map(|(q, _, _, _, _)| q).sum();
            prop_assert!(r.totals.units_sold <= units);
        }
    }
}
