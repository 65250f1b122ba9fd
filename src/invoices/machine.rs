//! The invoice's state machine and its money, pure.
//!
//! An invoice: `draft → open → paid | void | uncollectible` (`uncollectible → paid | void`).
//! A draft is edited and deleted freely; finalize freezes it. Void only while nothing is paid
//! and nothing credited. A credit note is issued at once (`issued`) against an open or paid
//! invoice: per line no more than what remains of it, in all no more than the invoice's total.

use serde::Serialize;

use super::tax::{self, Amounts};
use crate::money;

pub use payd_model::invoices::{Kind, Status};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the invoice is {}: it cannot be {action}", .status.as_str())]
    InvalidState {
        status: Status,
        action: &'static str,
    },
    #[error("a credit note cannot be {0}")]
    CreditNote(&'static str),
    #[error("the invoice has {0} paid: refund or credit it instead of voiding")]
    Paid(i64),
    #[error("the invoice has credit notes: it cannot be voided")]
    Credited,
    #[error("the invoice has no line {0:?}")]
    NoLine(String),
    #[error("line {line_id:?} has {left} left to credit")]
    LineExceeded { line_id: String, left: i64 },
    #[error("line {line_id:?} has a quantity of {left} left to credit")]
    QuantityExceeded { line_id: String, left: i64 },
    #[error("the invoice has {0} left to credit")]
    TotalExceeded(i64),
    #[error("the credit note must credit something")]
    Nothing,
    #[error("the due date {0} is before the issue date")]
    DueBeforeIssue(chrono::NaiveDate),
    #[error(
        "the payment has refunds: an invoice of it would show refunded money as paid \
         (invoice its lines as they stand instead)"
    )]
    PaymentRefunded,
}

/// What a change may do to an invoice in `status`.
fn need(status: Status, allowed: &[Status], action: &'static str) -> Result<(), Refusal> {
    match allowed.contains(&status) {
        true => Ok(()),
        false => Err(Refusal::InvalidState { status, action }),
    }
}

fn invoice_only(kind: Kind, action: &'static str) -> Result<(), Refusal> {
    match kind {
        Kind::Invoice => Ok(()),
        Kind::CreditNote => Err(Refusal::CreditNote(action)),
    }
}

/// Edit or delete: drafts only.
pub fn edit(status: Status, action: &'static str) -> Result<(), Refusal> {
    need(status, &[Status::Draft], action)
}

/// An invoice of a payment (made, or finalized): only while nothing of the payment is refunded,
/// pending refunds included, so that what it shows paid is what the buyer paid and kept.
pub fn of_payment(amount_refunded: i64) -> Result<(), Refusal> {
    match amount_refunded {
        0 => Ok(()),
        _ => Err(Refusal::PaymentRefunded),
    }
}

/// Finalize a draft: `paid` when what was paid covers the total, else `open`.
pub fn finalize(status: Status, total: i64, paid: i64) -> Result<Status, Refusal> {
    need(status, &[Status::Draft], "finalized")?;
    Ok(if paid >= total {
        Status::Paid
    } else {
        Status::Open
    })
}

pub fn void(kind: Kind, status: Status, paid: i64, credited: i64) -> Result<Status, Refusal> {
    invoice_only(kind, "voided")?;
    // What was paid or credited says more than the status it led to.
    if paid > 0 && status != Status::Void {
        return Err(Refusal::Paid(paid));
    }
    if credited > 0 && status != Status::Void {
        return Err(Refusal::Credited);
    }
    need(status, &[Status::Open, Status::Uncollectible], "voided")?;
    Ok(Status::Void)
}

pub fn mark_uncollectible(kind: Kind, status: Status) -> Result<Status, Refusal> {
    invoice_only(kind, "marked uncollectible")?;
    need(status, &[Status::Open], "marked uncollectible")?;
    Ok(Status::Uncollectible)
}

/// Paid out of band: what is due is paid.
pub fn mark_paid(kind: Kind, status: Status) -> Result<Status, Refusal> {
    invoice_only(kind, "marked paid")?;
    need(
        status,
        &[Status::Open, Status::Uncollectible],
        "marked paid",
    )?;
    Ok(Status::Paid)
}

pub use payd_model::invoices::Line;

/// Net and tax of all lines at one rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RateTotal {
    pub rate_bps: i64,
    pub amount: i64,
    pub tax: i64,
}

/// An invoice's sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    pub subtotal: i64,
    pub tax: i64,
    pub total: i64,
}

/// The sums of lines; `None` on overflow.
pub fn totals(lines: &[Line]) -> Option<Totals> {
    lines.iter().try_fold(Totals::default(), |t, l| {
        Some(Totals {
            subtotal: t.subtotal.checked_add(l.amount)?,
            tax: t.tax.checked_add(l.tax_amount)?,
            total: t.total.checked_add(l.total)?,
        })
    })
}

/// Subtotals per tax rate, lowest rate first.
pub fn by_rate(lines: &[Line]) -> Vec<RateTotal> {
    let mut out: Vec<RateTotal> = Vec::new();
    for l in lines {
        match out.iter_mut().find(|r| r.rate_bps == l.tax_rate_bps) {
            Some(r) => {
                r.amount = r.amount.saturating_add(l.amount);
                r.tax = r.tax.saturating_add(l.tax_amount);
            }
            None => out.push(RateTotal {
                rate_bps: l.tax_rate_bps,
                amount: l.amount,
                tax: l.tax_amount,
            }),
        }
    }
    out.sort_by_key(|r| r.rate_bps);
    out
}

/// The rate a line copied from a payment shows: its captured tax over its net, in basis
/// points (rounded half to even).
pub fn implied_rate(net: i64, tax: i64) -> i64 {
    match net > 0 && tax >= 0 {
        true => money::round_half_even(i128::from(tax) * 10_000, i128::from(net)),
        false => 0,
    }
}

/// A line whose amounts came from a tax evaluation.
pub fn with_amounts(mut line: Line, applied: &tax::Applied) -> Line {
    let Amounts { net, tax, total } = applied.amounts;
    line.tax_rule_id = applied.rule_id.clone();
    line.tax_rate_bps = applied.rate_bps;
    line.tax_inclusive = applied.inclusive;
    line.amount = net;
    line.tax_amount = tax;
    line.total = total;
    line
}

/// Lines priced by the tax rules in force at `at` for a buyer at `place`; `None` on overflow.
pub fn reprice(
    lines: &[Line],
    rules: &[tax::Rule],
    place: &tax::Place,
    at: chrono::DateTime<chrono::Utc>,
) -> Option<Vec<Line>> {
    lines
        .iter()
        .map(|l| {
            let base = l.quantity.checked_mul(l.unit_amount)?;
            let rule = tax::choose(rules, place, l.tax_category.as_deref(), at);
            Some(with_amounts(l.clone(), &tax::apply(base, rule)?))
        })
        .collect()
}

/// What a credit note asks of one line: some units, or an amount (tax included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineAsk {
    pub line_id: String,
    pub quantity: Option<i64>,
    pub amount: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreditAsk {
    Lines(Vec<LineAsk>),
    /// An amount (tax included), spread over the lines in proportion to what is left of each.
    Amount(i64),
}

/// A credit note's lines, and the invoice's lines with what they took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditPlan {
    pub credit_lines: Vec<Line>,
    pub invoice_lines: Vec<Line>,
    pub totals: Totals,
}

/// Plans a credit note against an invoice in `status` whose credit notes took `credited`.
pub fn credit(
    kind: Kind,
    status: Status,
    lines: &[Line],
    ask: &CreditAsk,
) -> Result<CreditPlan, Refusal> {
    invoice_only(kind, "credited")?;
    need(status, &[Status::Open, Status::Paid], "credited")?;
    let mut invoice_lines = lines.to_vec();
    let takes = match ask {
        CreditAsk::Lines(asks) => line_takes(&invoice_lines, asks)?,
        CreditAsk::Amount(amount) => {
            let left: i64 = invoice_lines.iter().map(Line::left).sum();
            if *amount > left {
                return Err(Refusal::TotalExceeded(left));
            }
            spread(*amount, &invoice_lines)
                .into_iter()
                .enumerate()
                .filter(|(_, share)| *share > 0)
                .map(|(i, share)| (i, 0, share))
                .collect()
        }
    };
    if takes.is_empty() {
        return Err(Refusal::Nothing);
    }
    let credit_lines = takes
        .into_iter()
        .map(|(i, units, amount)| take(&mut invoice_lines[i], units, amount))
        .collect::<Vec<_>>();
    let totals = totals(&credit_lines).ok_or(Refusal::Nothing)?;
    Ok(CreditPlan {
        credit_lines,
        invoice_lines,
        totals,
    })
}

/// What each asked line gives: (line index, units, amount with tax), each within what is left
/// of its line after the asks before it.
fn line_takes(lines: &[Line], asks: &[LineAsk]) -> Result<Vec<(usize, i64, i64)>, Refusal> {
    let mut takes: Vec<(usize, i64, i64)> = Vec::new();
    for a in asks {
        let i = lines
            .iter()
            .position(|l| l.line_id == a.line_id)
            .ok_or_else(|| Refusal::NoLine(a.line_id.clone()))?;
        let l = &lines[i];
        let taken: i64 = takes.iter().filter(|t| t.0 == i).map(|t| t.2).sum();
        let taken_units: i64 = takes.iter().filter(|t| t.0 == i).map(|t| t.1).sum();
        let left = l.left() - taken;
        let (units, amount) = match (a.quantity, a.amount) {
            (Some(q), _) => {
                let units_left = l.quantity - l.quantity_credited - taken_units;
                if q > units_left {
                    return Err(Refusal::QuantityExceeded {
                        line_id: l.line_id.clone(),
                        left: units_left,
                    });
                }
                // One rule for a unit, as a refund's: its share of the line's total, rounded
                // down on the units credited so far; the last units take what is left.
                let amount = match q == units_left {
                    true => left,
                    false => {
                        money::unit_share(l.total, l.quantity, l.quantity_credited + taken_units, q)
                    }
                };
                (q, amount)
            }
            (None, Some(amount)) => (0, amount),
            (None, None) => (0, left),
        };
        if amount > left {
            return Err(Refusal::LineExceeded {
                line_id: l.line_id.clone(),
                left,
            });
        }
        if amount > 0 {
            takes.push((i, units, amount));
        }
    }
    Ok(takes)
}

/// Takes `units` (0: an amount, not units) and `amount` with tax from the invoice's line `l`,
/// and returns the credit note's line for it.
fn take(l: &mut Line, units: i64, amount: i64) -> Line {
    // The tax in what is taken: of units, their share by the units' rule (so an exclusive
    // line's units show exactly `units × unit_amount` before tax); of an amount, in
    // proportion; the last of a line takes the rest of its tax.
    let tax_left = l.tax_amount - l.tax_credited;
    let tax = match amount == l.left() {
        true => tax_left,
        false if units > 0 => {
            money::unit_share(l.tax_amount, l.quantity, l.quantity_credited, units).min(tax_left)
        }
        false if l.total > 0 => money::round_half_even(
            i128::from(amount) * i128::from(l.tax_amount),
            i128::from(l.total),
        ),
        false => 0,
    };
    l.amount_credited += amount;
    l.quantity_credited += units;
    l.tax_credited += tax;
    debug_assert!(
        l.amount_credited <= l.total && l.quantity_credited <= l.quantity,
        "a line gives back no more than it charged"
    );
    // An amount, not units: shown as one unit whose price gives the line's base as the
    // invoice's lines do (quantity × unit_amount = the net under an exclusive rule, the
    // total under an inclusive one).
    let unit_amount = match (units, l.tax_inclusive) {
        (0, true) => amount,
        (0, false) => amount - tax,
        _ => l.unit_amount,
    };
    Line {
        line_id: l.line_id.clone(),
        name: l.name.clone(),
        quantity: units.max(1),
        unit_amount,
        product_id: l.product_id.clone(),
        price_id: l.price_id.clone(),
        tax_category: l.tax_category.clone(),
        tax_rule_id: l.tax_rule_id.clone(),
        tax_rate_bps: l.tax_rate_bps,
        tax_inclusive: l.tax_inclusive,
        tax_amount: tax,
        amount: amount - tax,
        total: amount,
        amount_credited: 0,
        quantity_credited: 0,
        tax_credited: 0,
    }
}

/// `amount` spread over the lines in proportion to what is left of each (largest remainder),
/// never more than what is left of a line. `amount` ≤ the sum of what is left.
fn spread(amount: i64, lines: &[Line]) -> Vec<i64> {
    let left: Vec<i64> = lines.iter().map(|l| l.left().max(0)).collect();
    money::largest_remainder(amount, &left)
}

/// What is still due on an invoice.
pub fn amount_due(total: i64, paid: i64, credited: i64) -> i64 {
    (total - paid - credited).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, qty: i64, unit: i64, rate: i64) -> Line {
        let net = qty * unit;
        let tax = money::round_half_even(i128::from(net) * i128::from(rate), 10_000);
        Line {
            line_id: id.into(),
            name: id.into(),
            quantity: qty,
            unit_amount: unit,
            product_id: None,
            price_id: None,
            tax_category: None,
            tax_rule_id: None,
            tax_rate_bps: rate,
            tax_inclusive: false,
            tax_amount: tax,
            amount: net,
            total: net + tax,
            amount_credited: 0,
            quantity_credited: 0,
            tax_credited: 0,
        }
    }

    #[test]
    fn lifecycle_refusals() {
        assert_eq!(finalize(Status::Draft, 100, 100), Ok(Status::Paid));
        assert_eq!(finalize(Status::Draft, 100, 0), Ok(Status::Open));
        assert!(finalize(Status::Open, 100, 0).is_err());
        assert_eq!(void(Kind::Invoice, Status::Open, 0, 0), Ok(Status::Void));
        assert_eq!(
            void(Kind::Invoice, Status::Open, 5, 0),
            Err(Refusal::Paid(5))
        );
        assert_eq!(
            void(Kind::Invoice, Status::Open, 0, 5),
            Err(Refusal::Credited)
        );
        assert!(void(Kind::Invoice, Status::Draft, 0, 0).is_err());
        assert!(void(Kind::CreditNote, Status::Issued, 0, 0).is_err());
        assert!(edit(Status::Open, "edited").is_err());
        assert_eq!(
            mark_uncollectible(Kind::Invoice, Status::Open),
            Ok(Status::Uncollectible)
        );
        assert_eq!(
            mark_paid(Kind::Invoice, Status::Uncollectible),
            Ok(Status::Paid)
        );
        assert!(mark_paid(Kind::Invoice, Status::Void).is_err());
    }

    #[test]
    fn credits_by_quantity_amount_and_whole_within_what_is_left() {
        let lines = vec![line("a", 3, 1000, 2000), line("b", 1, 500, 0)];
        // a: 3 × 10.00 + 20 % = 36.00; b: 5.00.
        let ask = CreditAsk::Lines(vec![LineAsk {
            line_id: "a".into(),
            quantity: Some(1),
            amount: None,
        }]);
        let p = credit(Kind::Invoice, Status::Paid, &lines, &ask).unwrap();
        assert_eq!(p.totals.total, 1200);
        assert_eq!(p.totals.tax, 200);
        assert_eq!(p.invoice_lines[0].quantity_credited, 1);
        // Two more units take the rest of the line exactly, tax included.
        let ask2 = CreditAsk::Lines(vec![LineAsk {
            line_id: "a".into(),
            quantity: Some(2),
            amount: None,
        }]);
        let p2 = credit(Kind::Invoice, Status::Paid, &p.invoice_lines, &ask2).unwrap();
        assert_eq!(p2.invoice_lines[0].amount_credited, 3600);
        assert_eq!(p2.invoice_lines[0].tax_credited, 600);
        assert_eq!(
            credit(Kind::Invoice, Status::Paid, &p2.invoice_lines, &ask),
            Err(Refusal::QuantityExceeded {
                line_id: "a".into(),
                left: 0
            })
        );
        let too_much = CreditAsk::Lines(vec![LineAsk {
            line_id: "b".into(),
            quantity: None,
            amount: Some(501),
        }]);
        assert_eq!(
            credit(Kind::Invoice, Status::Open, &lines, &too_much),
            Err(Refusal::LineExceeded {
                line_id: "b".into(),
                left: 500
            })
        );
        assert_eq!(
            credit(
                Kind::Invoice,
                Status::Open,
                &lines,
                &CreditAsk::Amount(4101)
            ),
            Err(Refusal::TotalExceeded(4100))
        );
        let whole = credit(
            Kind::Invoice,
            Status::Open,
            &lines,
            &CreditAsk::Amount(4100),
        )
        .unwrap();
        assert_eq!(whole.totals.total, 4100);
        assert!(whole.invoice_lines.iter().all(|l| l.left() == 0));
        assert!(credit(Kind::Invoice, Status::Void, &lines, &CreditAsk::Amount(1)).is_err());
        assert!(credit(Kind::Invoice, Status::Draft, &lines, &CreditAsk::Amount(1)).is_err());
        assert_eq!(
            credit(
                Kind::Invoice,
                Status::Open,
                &lines,
                &CreditAsk::Lines(vec![])
            ),
            Err(Refusal::Nothing)
        );
    }

    #[test]
    fn an_amount_credit_shows_units_that_price_its_lines() {
        let mut lines = vec![line("a", 3, 1000, 2000), line("b", 1, 500, 700)];
        let mut inclusive = line("c", 2, 610, 0);
        (
            inclusive.tax_inclusive,
            inclusive.tax_amount,
            inclusive.amount,
        ) = (true, 110, 1110);
        lines.push(inclusive);
        for ask in [
            CreditAsk::Amount(1234),
            CreditAsk::Lines(vec![LineAsk {
                line_id: "a".into(),
                quantity: None,
                amount: Some(777),
            }]),
        ] {
            let p = credit(Kind::Invoice, Status::Paid, &lines, &ask).unwrap();
            for l in &p.credit_lines {
                let base = if l.tax_inclusive { l.total } else { l.amount };
                assert_eq!(l.quantity * l.unit_amount, base, "{l:?}");
            }
        }
    }

    /// Units are credited as a payment's units are refunded (`money::unit_share`): 3 units of
    /// 335 with 2 of tax credit 335, 336 and 336, and each credit line's units price it.
    #[test]
    fn units_credit_what_they_would_refund() {
        let mut lines = vec![line("a", 3, 335, 0)];
        (lines[0].tax_amount, lines[0].total) = (2, 1007);
        lines.push(line("b", 3, 1000, 0));
        (lines[1].tax_inclusive, lines[1].tax_amount, lines[1].amount) = (true, 5, 2995);
        let one = |line_id: &str| {
            CreditAsk::Lines(vec![LineAsk {
                line_id: line_id.into(),
                quantity: Some(1),
                amount: None,
            }])
        };
        let mut taken = Vec::new();
        for _ in 0..3 {
            for id in ["a", "b"] {
                let p = credit(Kind::Invoice, Status::Paid, &lines, &one(id)).unwrap();
                let l = &p.credit_lines[0];
                let base = if l.tax_inclusive { l.total } else { l.amount };
                assert_eq!(l.quantity * l.unit_amount, base, "{l:?}");
                taken.push((l.total, l.tax_amount));
                lines = p.invoice_lines;
            }
        }
        assert_eq!(
            taken,
            [
                (335, 0),
                (1000, 1),
                (336, 1),
                (1000, 2),
                (336, 1),
                (1000, 2)
            ]
        );
        for l in &lines {
            assert_eq!((l.amount_credited, l.tax_credited), (l.total, l.tax_amount));
        }
    }

    #[test]
    fn an_invoice_of_a_refunded_payment_is_refused() {
        assert_eq!(of_payment(0), Ok(()));
        assert_eq!(of_payment(1), Err(Refusal::PaymentRefunded));
    }

    #[test]
    fn a_spread_amount_stays_within_each_line() {
        let mut lines = vec![
            line("a", 1, 333, 0),
            line("b", 1, 333, 0),
            line("c", 1, 334, 0),
        ];
        lines[0].amount_credited = 300;
        let shares = spread(700, &lines);
        assert_eq!(shares.iter().sum::<i64>(), 700);
        for (s, l) in shares.iter().zip(&lines) {
            assert!(*s <= l.left(), "{shares:?}");
        }
    }

    #[test]
    fn breakdown_by_rate() {
        let lines = vec![
            line("a", 1, 1000, 2000),
            line("b", 2, 100, 700),
            line("c", 1, 50, 2000),
        ];
        let r = by_rate(&lines);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].rate_bps, r[0].amount, r[0].tax), (700, 200, 14));
        assert_eq!((r[1].rate_bps, r[1].amount, r[1].tax), (2000, 1050, 210));
        assert_eq!(implied_rate(1000, 190), 1900);
    }
}
