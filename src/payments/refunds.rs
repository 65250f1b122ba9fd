//! The refund decision, pure: how much a refund takes from the payment and from each product
//! line, or why it is refused. It lives with the payment aggregate because the payment's actor
//! decides it, so that captures and refunds of one payment never interleave.
//!
//! Invariants: Σ(pending + succeeded refunds) ≤ captured; per line, refunded quantity ≤
//! quantity and refunded amount ≤ the line's amount. What a line refund may take is one rule,
//! [`refundable_lines`], which `GET /payments/{id}/lines` shows and [`plan`] enforces: the
//! line's share of what was captured, less its refunds, and never more than the payment has
//! left to refund. A refund by quantity takes
//! `quantity × unit_amount` plus the line's tax in proportion, [`money::unit_share`]: rounded
//! down on the cumulative share (`⌊tax × refunded_quantity / quantity⌋`), so the last unit
//! takes what rounding left and a fully refunded line has refunded exactly its tax. A credit
//! note's units take their share of an invoice line by the same rule.

use super::machine::{Line, State, Status};
use crate::money;

/// One line of a refund request: by quantity or by amount, not both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineAsk {
    pub line_id: String,
    pub quantity: Option<i64>,
    pub amount: Option<i64>,
}

/// What the merchant asks: an amount (or everything left), or lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    Amount(Option<i64>),
    Lines(Vec<LineAsk>),
}

pub use payd_model::refunds::LineRefund;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub amount: i64,
    pub lines: Vec<LineRefund>,
}

pub use super::machine::Disputed;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the payment is {}: nothing captured can be refunded", .0.as_str())]
    InvalidState(Status),
    #[error("dispute {dispute_id} on this payment is open: no refund until it closes")]
    DisputeOpen { dispute_id: String },
    #[error("the amount must be greater than 0")]
    NotPositive { param: String },
    #[error("the refund exceeds the refundable amount of {available}")]
    ExceedsRefundable { param: &'static str, available: i64 },
    #[error("the payment has no line {line_id:?}")]
    UnknownLine { param: String, line_id: String },
    #[error("refund a line by quantity or by amount, not both and not neither")]
    QuantityOrAmount { param: String },
    #[error("only {left} units of this line can still be refunded")]
    LineQuantityExceeded { param: String, left: i64 },
    #[error("only {left} of this line can still be refunded")]
    LineAmountExceeded { param: String, left: i64 },
    #[error("a line may appear once per refund")]
    DuplicateLine { param: String },
    #[error("send 1 to 100 lines")]
    NoLines,
}

impl Refusal {
    /// The request field the refusal is about.
    pub fn param(&self) -> Option<&str> {
        match self {
            Refusal::NotPositive { param }
            | Refusal::UnknownLine { param, .. }
            | Refusal::QuantityOrAmount { param }
            | Refusal::LineQuantityExceeded { param, .. }
            | Refusal::LineAmountExceeded { param, .. }
            | Refusal::DuplicateLine { param } => Some(param),
            Refusal::ExceedsRefundable { param, .. } => Some(param),
            Refusal::NoLines => Some("lines"),
            Refusal::InvalidState(_) => None,
            Refusal::DisputeOpen { .. } => Some("payment_id"),
        }
    }
}

/// How much is left to refund.
pub fn refundable(state: &State) -> i64 {
    state.captured - state.refunded
}

/// What the payment has left to refund, or why it can refund nothing.
fn available(state: &State, disputed: &Disputed) -> Result<i64, Refusal> {
    if let Some(id) = &disputed.open {
        return Err(Refusal::DisputeOpen {
            dispute_id: id.clone(),
        });
    }
    if state.captured == 0
        || matches!(
            state.status,
            Status::CancelledPostCapture | Status::Conflicted
        )
    {
        return Err(Refusal::InvalidState(state.status));
    }
    Ok((refundable(state) - disputed.kept_by_buyer).max(0))
}

/// Each line's share of `captured`, in proportion to its amount; the shares add up to
/// `captured` exactly (largest remainder).
pub fn captured_shares(lines: &[Line], captured: i64) -> Vec<i64> {
    let amounts: Vec<i64> = lines.iter().map(|l| l.amount).collect();
    money::largest_remainder(captured, &amounts)
}

/// What a refund of each line alone may take now: its captured share (never more than the
/// line) less what was refunded from it, within what the payment has left to refund; 0 where
/// the payment can refund nothing.
pub fn refundable_lines(state: &State, lines: &[Line], disputed: &Disputed) -> Vec<i64> {
    let available = available(state, disputed).unwrap_or(0);
    captured_shares(lines, state.captured)
        .into_iter()
        .zip(lines)
        .map(|(share, line)| (share.min(line.amount) - line.amount_refunded).clamp(0, available))
        .collect()
}

/// Decides a refund, or refuses it. Invariant: Σ refunds + what the buyer kept through
/// disputes ≤ captured, and no line gives back more than [`refundable_lines`] shows for it.
pub fn plan(
    state: &State,
    lines: &[Line],
    ask: &Ask,
    disputed: &Disputed,
) -> Result<Plan, Refusal> {
    let available = available(state, disputed)?;
    let plan = match ask {
        Ask::Amount(asked) => {
            let amount = asked.unwrap_or(available);
            if asked.is_some() && amount <= 0 {
                return Err(Refusal::NotPositive {
                    param: "amount".into(),
                });
            }
            Plan {
                amount,
                lines: vec![],
            }
        }
        Ask::Lines(asks) => {
            if asks.is_empty() || asks.len() > 100 {
                return Err(Refusal::NoLines);
            }
            let left_by_line = refundable_lines(state, lines, disputed);
            let mut out: Vec<LineRefund> = Vec::with_capacity(asks.len());
            for (i, ask) in asks.iter().enumerate() {
                let param = |f: &str| format!("lines[{i}].{f}");
                if out.iter().any(|l| l.line_id == ask.line_id) {
                    return Err(Refusal::DuplicateLine {
                        param: param("line_id"),
                    });
                }
                let index = lines
                    .iter()
                    .position(|l| l.line_id == ask.line_id)
                    .ok_or_else(|| Refusal::UnknownLine {
                        param: param("line_id"),
                        line_id: ask.line_id.clone(),
                    })?;
                let (line, amount_left) = (&lines[index], left_by_line[index]);
                let (quantity, amount) = line_refund(line, ask, amount_left, &param)?;
                out.push(LineRefund {
                    line_id: line.line_id.clone(),
                    quantity,
                    amount,
                });
            }
            let amount = out
                .iter()
                .try_fold(0i64, |acc, l| acc.checked_add(l.amount));
            Plan {
                amount: amount.unwrap_or(i64::MAX),
                lines: out,
            }
        }
    };
    if plan.amount <= 0 || plan.amount > available {
        let param = match ask {
            Ask::Amount(_) => "amount",
            Ask::Lines(_) => "lines",
        };
        return Err(Refusal::ExceedsRefundable { param, available });
    }
    Ok(plan)
}

/// What one asked line gives back: (quantity, amount with tax), within what is left of it
/// (`amount_left`); `param` names the ask's fields in a refusal.
fn line_refund(
    line: &Line,
    ask: &LineAsk,
    amount_left: i64,
    param: &dyn Fn(&str) -> String,
) -> Result<(i64, i64), Refusal> {
    let (quantity, amount) = match (ask.quantity, ask.amount) {
        (Some(q), None) => {
            let q_left = line.quantity - line.quantity_refunded;
            if q <= 0 {
                return Err(Refusal::NotPositive {
                    param: param("quantity"),
                });
            }
            if q > q_left {
                return Err(Refusal::LineQuantityExceeded {
                    param: param("quantity"),
                    left: q_left,
                });
            }
            let amount = line
                .unit_amount
                .checked_mul(q)
                .and_then(|a| {
                    a.checked_add(money::unit_share(
                        line.tax_amount,
                        line.quantity,
                        line.quantity_refunded,
                        q,
                    ))
                })
                .ok_or(Refusal::LineQuantityExceeded {
                    param: param("quantity"),
                    left: q_left,
                })?;
            if amount > amount_left {
                return Err(Refusal::LineAmountExceeded {
                    param: param("quantity"),
                    left: amount_left,
                });
            }
            (q, amount)
        }
        (None, Some(a)) => {
            if a <= 0 {
                return Err(Refusal::NotPositive {
                    param: param("amount"),
                });
            }
            if a > amount_left {
                return Err(Refusal::LineAmountExceeded {
                    param: param("amount"),
                    left: amount_left,
                });
            }
            (0, a)
        }
        _ => {
            return Err(Refusal::QuantityOrAmount {
                param: param("quantity"),
            })
        }
    };
    Ok((quantity, amount))
}

/// Reserves a planned refund on the payment and its lines (pending and succeeded refunds both
/// hold their balance).
pub fn reserve(state: &State, lines: &[Line], plan: &Plan) -> (State, Vec<Line>) {
    shift(state, lines, plan, 1)
}

/// Gives a failed refund's balance back.
pub fn release(state: &State, lines: &[Line], plan: &Plan) -> (State, Vec<Line>) {
    shift(state, lines, plan, -1)
}

fn shift(state: &State, lines: &[Line], plan: &Plan, sign: i64) -> (State, Vec<Line>) {
    let mut next = state.clone();
    next.refunded += sign * plan.amount;
    let lines = lines
        .iter()
        .map(|line| {
            let mut line = line.clone();
            for r in plan.lines.iter().filter(|r| r.line_id == line.line_id) {
                line.quantity_refunded += sign * r.quantity;
                line.amount_refunded += sign * r.amount;
            }
            line
        })
        .collect();
    debug_assert!(
        (0..=next.captured).contains(&next.refunded),
        "0 ≤ refunded ≤ captured"
    );
    (next, lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payments::machine::CaptureMethod;
    use proptest::prelude::*;

    fn state(captured: i64) -> State {
        State {
            status: Status::Succeeded,
            amount: captured,
            capture_method: CaptureMethod::Automatic,
            authorized: captured,
            captured,
            refunded: 0,
            attempts: 1,
            max_attempts: 3,
            captured_at: None,
        }
    }

    fn line(id: &str, quantity: i64, unit: i64, tax: i64) -> Line {
        Line {
            line_id: id.into(),
            product_id: None,
            price_id: None,
            name: id.into(),
            quantity,
            unit_amount: unit,
            tax_amount: tax,
            amount: quantity * unit + tax,
            quantity_refunded: 0,
            amount_refunded: 0,
        }
    }

    /// A plan for a payment without disputes.
    fn plan(s: &State, lines: &[Line], ask: &Ask) -> Result<Plan, Refusal> {
        super::plan(s, lines, ask, &Disputed::default())
    }

    #[test]
    fn an_open_dispute_refuses_and_a_lost_one_takes_its_amount() {
        let s = state(500);
        let open = Disputed {
            open: Some("dp_1".into()),
            kept_by_buyer: 0,
        };
        assert_eq!(
            super::plan(&s, &[], &Ask::Amount(Some(1)), &open),
            Err(Refusal::DisputeOpen {
                dispute_id: "dp_1".into()
            })
        );
        let lost = Disputed {
            open: None,
            kept_by_buyer: 400,
        };
        assert_eq!(
            super::plan(&s, &[], &Ask::Amount(None), &lost).map(|p| p.amount),
            Ok(100)
        );
        assert_eq!(
            super::plan(&s, &[], &Ask::Amount(Some(101)), &lost),
            Err(Refusal::ExceedsRefundable {
                param: "amount",
                available: 100
            })
        );
    }

    fn by_qty(id: &str, q: i64) -> LineAsk {
        LineAsk {
            line_id: id.into(),
            quantity: Some(q),
            amount: None,
        }
    }

    #[test]
    fn captured_shares_add_up() {
        let lines = vec![
            line("a", 1, 100, 0),
            line("b", 1, 100, 0),
            line("c", 1, 100, 0),
        ];
        let shares = captured_shares(&lines, 100);
        assert_eq!(shares.iter().sum::<i64>(), 100);
        assert_eq!(shares, vec![34, 33, 33]);
        assert_eq!(captured_shares(&lines, 300), vec![100, 100, 100]);
    }

    #[test]
    fn amounts_and_the_whole_remainder() {
        let s = state(500);
        assert_eq!(plan(&s, &[], &Ask::Amount(None)).unwrap().amount, 500);
        let p = plan(&s, &[], &Ask::Amount(Some(200))).unwrap();
        let (s2, _) = reserve(&s, &[], &p);
        assert_eq!(refundable(&s2), 300);
        assert_eq!(
            plan(&s2, &[], &Ask::Amount(Some(301))),
            Err(Refusal::ExceedsRefundable {
                param: "amount",
                available: 300
            })
        );
        let (s3, _) = release(&s2, &[], &p);
        assert_eq!(refundable(&s3), 500);
        let mut none = state(0);
        none.status = Status::RequiresCapture;
        assert_eq!(
            plan(&none, &[], &Ask::Amount(None)),
            Err(Refusal::InvalidState(Status::RequiresCapture))
        );
    }

    #[test]
    fn quantities_take_their_tax_in_proportion_and_add_up_exactly() {
        // 3 × 100 with 10 of tax: 3.33… per unit.
        let lines = vec![line("a", 3, 100, 10)];
        let s = state(310);
        let (mut s, mut lines) = (s, lines);
        let mut amounts = vec![];
        for _ in 0..3 {
            let p = plan(&s, &lines, &Ask::Lines(vec![by_qty("a", 1)])).unwrap();
            amounts.push(p.amount);
            (s, lines) = reserve(&s, &lines, &p);
        }
        assert_eq!(amounts, [103, 103, 104]);
        assert_eq!(lines[0].amount_refunded, 310);
        let err = plan(&s, &lines, &Ask::Lines(vec![by_qty("a", 1)])).unwrap_err();
        assert_eq!(err.param(), Some("lines[0].quantity"));
    }

    #[test]
    fn line_asks_are_checked() {
        let lines = vec![line("a", 2, 100, 0), line("b", 1, 50, 0)];
        let s = state(250);
        let err = |ask: Vec<LineAsk>| plan(&s, &lines, &Ask::Lines(ask)).unwrap_err();
        assert_eq!(err(vec![by_qty("zz", 1)]).param(), Some("lines[0].line_id"));
        assert_eq!(err(vec![by_qty("a", 3)]).param(), Some("lines[0].quantity"));
        assert_eq!(
            err(vec![LineAsk {
                line_id: "a".into(),
                quantity: Some(1),
                amount: Some(5)
            }])
            .param(),
            Some("lines[0].quantity")
        );
        assert_eq!(
            err(vec![by_qty("a", 1), by_qty("a", 1)]).param(),
            Some("lines[1].line_id")
        );
        assert_eq!(
            err(vec![LineAsk {
                line_id: "b".into(),
                quantity: None,
                amount: Some(51)
            }])
            .param(),
            Some("lines[0].amount")
        );
        let p = plan(
            &s,
            &lines,
            &Ask::Lines(vec![
                by_qty("a", 2),
                LineAsk {
                    line_id: "b".into(),
                    quantity: None,
                    amount: Some(20),
                },
            ]),
        )
        .unwrap();
        assert_eq!(p.amount, 220);
    }

    proptest! {
        /// The line balance shown is the one enforced: after any mix of partial captures,
        /// amount refunds, line refunds (some failing) and what disputes kept, a refund of
        /// exactly a line's `amount_refundable` is accepted and one unit more is refused with
        /// the line's `lines[0].amount` named; and the payment-level bound holds throughout.
        #[test]
        fn the_line_balance_shown_is_the_one_enforced(
            shape in proptest::collection::vec((1i64..5, 1i64..300, 0i64..50), 1..4),
            steps in proptest::collection::vec((0u8..4, 0usize..4, 0i64..6, 0i64..400, any::<bool>()), 1..30),
            kept in 0i64..100,
        ) {
            let lines: Vec<Line> = shape.iter().enumerate().map(|(i, (q, u, t))| line(&format!("l{i}"), *q, *u, *t)).collect();
            let total: i64 = lines.iter().map(|l| l.amount).sum();
            let mut s = state(total);
            s.captured = 0;
            s.status = Status::PartiallyCapturedAndCapturable;
            let disputed = Disputed { open: None, kept_by_buyer: kept.min(total) };
            let mut lines = lines;
            for (kind, which, q, a, fails) in steps {
                let id = format!("l{}", which % lines.len());
                let ask = match kind {
                    // A further capture.
                    0 => {
                        s.captured = (s.captured + a).min(s.authorized);
                        continue;
                    }
                    1 => Ask::Amount(Some(a)),
                    2 => Ask::Lines(vec![LineAsk { line_id: id, quantity: Some(q), amount: None }]),
                    _ => Ask::Lines(vec![LineAsk { line_id: id, quantity: None, amount: Some(a) }]),
                };
                if let Ok(p) = super::plan(&s, &lines, &ask, &disputed) {
                    let (s2, l2) = reserve(&s, &lines, &p);
                    (s, lines) = if fails { release(&s2, &l2, &p) } else { (s2, l2) };
                }
                // The payment-level bound: refunds and what the buyer kept fit in the capture.
                prop_assert!(s.refunded >= 0);
                prop_assert!(s.refunded == 0 || s.refunded + disputed.kept_by_buyer <= s.captured);
                let shown = refundable_lines(&s, &lines, &disputed);
                for (l, left) in lines.iter().zip(&shown) {
                    prop_assert!(l.amount_refunded >= 0 && l.amount_refunded <= l.amount);
                    let by_amount = |amount: i64| Ask::Lines(vec![LineAsk { line_id: l.line_id.clone(), quantity: None, amount: Some(amount) }]);
                    if *left > 0 {
                        let p = super::plan(&s, &lines, &by_amount(*left), &disputed);
                        prop_assert_eq!(p.map(|p| p.amount), Ok(*left));
                    }
                    let refused = super::plan(&s, &lines, &by_amount(left + 1), &disputed);
                    prop_assert!(refused.is_err(), "{} + 1 on {} accepted", left, l.line_id);
                    if let (true, Err(refusal)) = (s.captured > 0, refused) {
                        prop_assert_eq!(refusal.param(), Some("lines[0].amount"));
                    }
                }
            }
        }

        /// Any sequence of line and amount refunds, some failing, keeps every balance ≥ 0 and
        /// within its bounds.
        #[test]
        fn balances_never_go_negative(
            shape in proptest::collection::vec((1i64..5, 0i64..300, 0i64..50), 1..4),
            steps in proptest::collection::vec((0u8..3, 0usize..4, 0i64..6, 0i64..400, any::<bool>()), 1..30),
        ) {
            let lines: Vec<Line> = shape.iter().enumerate().map(|(i, (q, u, t))| line(&format!("l{i}"), *q, *u, *t)).collect();
            let total: i64 = lines.iter().map(|l| l.amount).sum();
            prop_assume!(total > 0);
            let (mut s, mut lines) = (state(total), lines);
            for (kind, which, q, a, fails) in steps {
                let id = format!("l{}", which % lines.len());
                let ask = match kind {
                    0 => Ask::Amount(Some(a)),
                    1 => Ask::Lines(vec![LineAsk { line_id: id, quantity: Some(q), amount: None }]),
                    _ => Ask::Lines(vec![LineAsk { line_id: id, quantity: None, amount: Some(a) }]),
                };
                if let Ok(p) = plan(&s, &lines, &ask) {
                    let (s2, l2) = reserve(&s, &lines, &p);
                    (s, lines) = if fails { release(&s2, &l2, &p) } else { (s2, l2) };
                }
                prop_assert!(s.refunded >= 0 && s.refunded <= s.captured);
                for l in &lines {
                    prop_assert!(l.quantity_refunded >= 0 && l.quantity_refunded <= l.quantity);
                    prop_assert!(l.amount_refunded >= 0 && l.amount_refunded <= l.amount);
                }
            }
        }
    }
}
