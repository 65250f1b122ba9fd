//! A shop's book, pure: the balances are the sums of the entries, and a payout is reserved
//! only from what is available. The stores write the same entries (`store.rs`); this model
//! states the rules and carries their property test.

pub use payd_model::ledger::{Bucket, Kind};

/// One entry: `amount` (signed) into `bucket`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub bucket: Bucket,
    pub amount: i64,
    pub kind: Kind,
}

const fn mv(bucket: Bucket, amount: i64, kind: Kind) -> Move {
    Move {
        bucket,
        amount,
        kind,
    }
}

/// A payment's entries when its captured and refunded amounts change (`before` → `after`), and
/// when a cancel after capture gives the buyer the rest.
pub fn payment_moves(
    (captured_before, refunded_before): (i64, i64),
    (captured, refunded): (i64, i64),
    cancelled_after_capture: bool,
) -> Vec<Move> {
    let mut out = Vec::new();
    if captured > captured_before {
        out.push(mv(
            Bucket::Available,
            captured - captured_before,
            Kind::Capture,
        ));
    }
    match refunded.cmp(&refunded_before) {
        std::cmp::Ordering::Greater => out.push(mv(
            Bucket::Available,
            -(refunded - refunded_before),
            Kind::Refund,
        )),
        std::cmp::Ordering::Less => out.push(mv(
            Bucket::Available,
            refunded_before - refunded,
            Kind::RefundFailure,
        )),
        std::cmp::Ordering::Equal => {}
    }
    if cancelled_after_capture && captured > refunded {
        out.push(mv(
            Bucket::Available,
            -(captured - refunded),
            Kind::CaptureCancel,
        ));
    }
    out
}

/// A dispute the buyer keeps.
pub fn dispute_moves(amount: i64) -> Vec<Move> {
    vec![mv(Bucket::Available, -amount, Kind::Dispute)]
}

/// A payout's reservation: out of available, into pending.
pub fn reserve_moves(amount: i64) -> Vec<Move> {
    vec![
        mv(Bucket::Available, -amount, Kind::Payout),
        mv(Bucket::Pending, amount, Kind::Payout),
    ]
}

/// A reserved payout paid out: it leaves pending.
pub fn paid_moves(amount: i64) -> Vec<Move> {
    vec![mv(Bucket::Pending, -amount, Kind::Payout)]
}

/// A reserved payout failed or cancelled: back to available.
pub fn release_moves(amount: i64) -> Vec<Move> {
    vec![
        mv(Bucket::Pending, -amount, Kind::PayoutRelease),
        mv(Bucket::Available, amount, Kind::PayoutRelease),
    ]
}

/// A paid payout returned.
pub fn reversal_moves(amount: i64) -> Vec<Move> {
    vec![mv(Bucket::Available, amount, Kind::PayoutReversal)]
}

/// What a bucket holds: the sum of its entries.
pub fn sum(moves: &[Move], bucket: Bucket) -> i64 {
    moves
        .iter()
        .filter(|m| m.bucket == bucket)
        .map(|m| m.amount)
        .sum()
}

/// Whether a payout of `amount` may be reserved out of these entries.
pub fn can_reserve(moves: &[Move], amount: i64) -> bool {
    amount > 0 && sum(moves, Bucket::Available) >= amount
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Capture(i64),
        Refund(usize, i64),
        FailRefund(usize),
        Dispute(usize, i64),
        Payout(i64),
        Settle(usize, bool),
        Reverse(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1i64..10_000).prop_map(Op::Capture),
            (0usize..8, 1i64..5_000).prop_map(|(i, a)| Op::Refund(i, a)),
            (0usize..8).prop_map(Op::FailRefund),
            (0usize..8, 1i64..5_000).prop_map(|(i, a)| Op::Dispute(i, a)),
            (1i64..20_000).prop_map(Op::Payout),
            (0usize..8, any::<bool>()).prop_map(|(i, ok)| Op::Settle(i, ok)),
            (0usize..8).prop_map(Op::Reverse),
        ]
    }

    proptest! {
        /// For any sequence of money operations on a shop, the balances are the sums of the
        /// entries, a payout is reserved only from what is available, and no payout leaves the
        /// available balance below zero.
        #[test]
        fn balances_are_the_entries_sums_and_payouts_never_overdraw(ops in prop::collection::vec(op(), 0..60)) {
            let mut book: Vec<Move> = Vec::new();
            // Payments: (captured, refunded); refunds: (payment, amount, failed);
            // payouts: (amount, state: 0 reserved, 1 paid, 2 released, 3 reversed).
            let mut payments: Vec<(i64, i64)> = Vec::new();
            let mut refunds: Vec<(usize, i64, bool)> = Vec::new();
            let mut payouts: Vec<(i64, u8)> = Vec::new();
            let (mut available, mut pending) = (0i64, 0i64);
            for op in ops {
                let before = sum(&book, Bucket::Available);
                match op {
                    Op::Capture(a) => {
                        payments.push((0, 0));
                        let moves = payment_moves((0, 0), (a, 0), false);
                        payments.last_mut().unwrap().0 = a;
                        available += a;
                        book.extend(moves);
                    }
                    Op::Refund(i, a) => {
                        let Some(p) = payments.get_mut(i) else { continue };
                        let a = a.min(p.0 - p.1);
                        if a <= 0 { continue }
                        book.extend(payment_moves(*p, (p.0, p.1 + a), false));
                        p.1 += a;
                        available -= a;
                        refunds.push((i, a, false));
                    }
                    Op::FailRefund(r) => {
                        let Some(refund) = refunds.get_mut(r).filter(|r| !r.2) else { continue };
                        refund.2 = true;
                        let p = &mut payments[refund.0];
                        book.extend(payment_moves(*p, (p.0, p.1 - refund.1), false));
                        p.1 -= refund.1;
                        available += refund.1;
                    }
                    Op::Dispute(i, a) => {
                        let Some(p) = payments.get(i) else { continue };
                        let a = a.min(p.0 - p.1);
                        if a <= 0 { continue }
                        book.extend(dispute_moves(a));
                        available -= a;
                    }
                    Op::Payout(a) => {
                        if can_reserve(&book, a) {
                            book.extend(reserve_moves(a));
                            available -= a;
                            pending += a;
                            payouts.push((a, 0));
                            prop_assert!(sum(&book, Bucket::Available) >= 0);
                        } else {
                            prop_assert!(before < a);
                        }
                    }
                    Op::Settle(i, ok) => {
                        let Some(p) = payouts.get_mut(i).filter(|p| p.1 == 0) else { continue };
                        if ok {
                            book.extend(paid_moves(p.0));
                            p.1 = 1;
                        } else {
                            book.extend(release_moves(p.0));
                            available += p.0;
                            p.1 = 2;
                        }
                        pending -= p.0;
                    }
                    Op::Reverse(i) => {
                        let Some(p) = payouts.get_mut(i).filter(|p| p.1 == 1) else { continue };
                        book.extend(reversal_moves(p.0));
                        available += p.0;
                        p.1 = 3;
                    }
                }
                prop_assert_eq!(sum(&book, Bucket::Available), available);
                prop_assert_eq!(sum(&book, Bucket::Pending), pending);
                prop_assert!(pending >= 0);
            }
        }
    }

    #[test]
    fn a_cancel_after_capture_gives_back_what_was_left() {
        let m = payment_moves((1000, 300), (1000, 300), true);
        assert_eq!(m, vec![mv(Bucket::Available, -700, Kind::CaptureCancel)]);
        let m = payment_moves((0, 0), (1000, 0), false);
        assert_eq!(sum(&m, Bucket::Available), 1000);
    }
}
