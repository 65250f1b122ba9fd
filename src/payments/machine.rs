//! The payment state machine: pure transitions over the payment's status and amounts.
//!
//! Nothing here does I/O or knows actix or SeaORM. The actor asks whether a command is
//! allowed, calls the processor, and hands the processor's answer back here to get the next
//! state. Every function either returns the new state or a typed refusal naming the current
//! status.
//!
//! Invariant: `0 ≤ refunded ≤ captured ≤ authorized ≤ amount`, and no transition leaves a
//! terminal status (except `settle`, which can only report a contradiction as `conflicted`).

pub use crate::processors::model::{Authorization, ProcessorView};
use chrono::{DateTime, Duration, Utc};

pub use payd_model::payments::{CaptureMethod, Status};

/// What the machine needs to know of a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub status: Status,
    pub amount: i64,
    pub capture_method: CaptureMethod,
    pub authorized: i64,
    pub captured: i64,
    pub refunded: i64,
    /// Confirm attempts so far.
    pub attempts: i32,
    pub max_attempts: i32,
    pub captured_at: Option<DateTime<Utc>>,
}

impl State {
    pub fn capturable(&self) -> i64 {
        if self.status.is_capturable() {
            self.authorized - self.captured
        } else {
            0
        }
    }
}

/// A refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the payment is {}; this operation is not allowed in that status", .0.as_str())]
    InvalidState(Status),
    #[error("the amount must be greater than 0")]
    AmountNotPositive,
    #[error("the amount exceeds the capturable amount of {0}")]
    AmountExceedsCapturable(i64),
    #[error("dispute {0} on this payment is open: the capture cannot be voided until it closes")]
    DisputeOpen(String),
    #[error("the payment has a refund: a capture with refunds cannot be voided; refund the rest instead")]
    RefundExists,
    #[error(
        "the capture is more than 30 minutes old and can no longer be voided; refund it instead"
    )]
    VoidWindowClosed,
    #[error("the payment's processor cannot void a capture: refund it instead")]
    CaptureNotVoidable,
}

/// What the payment's disputes take from what can still go back to the buyer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Disputed {
    /// An open dispute (`opened` or `challenged`): no refund and no void of the capture until
    /// it closes.
    pub open: Option<String>,
    /// What the buyer kept through disputes lost, accepted or expired.
    pub kept_by_buyer: i64,
}

/// The amount a dispute opened now would take: what was captured and is not refunded. None
/// when nothing is left, or when a cancel after capture gave the buyer everything back.
pub fn dispute_amount(state: &State) -> Option<i64> {
    if state.status == Status::CancelledPostCapture {
        return None;
    }
    let amount = state.captured - state.refunded;
    (amount > 0).then_some(amount)
}

/// How a cancel must be carried out at the processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelKind {
    /// Nothing was authorized: only our record changes.
    Local,
    /// Void the authorization.
    Void,
    /// Release the uncaptured remainder; what was captured stays.
    ReleaseRemainder,
    /// Void captured funds inside the processor's void window.
    VoidCapture,
}

pub fn refuse(state: &State) -> Refusal {
    Refusal::InvalidState(state.status)
}

pub fn check_update(state: &State) -> Result<(), Refusal> {
    state
        .status
        .is_unconfirmed()
        .then_some(())
        .ok_or_else(|| refuse(state))
}

pub fn check_confirm(state: &State) -> Result<(), Refusal> {
    check_update(state)
}

/// The state after the processor answered a confirm. The attempt counts once: a payment
/// already `processing` it (the processor answered "pending", or did not answer) does not
/// count it again when its outcome arrives; one the processor refused untried does not count.
pub fn confirm(state: &State, auth: Authorization, now: DateTime<Utc>) -> State {
    let mut next = state.clone();
    if state.status != Status::Processing && auth != Authorization::Refused {
        next.attempts = state.attempts.saturating_add(1);
    }
    apply_authorization(&mut next, auth, now);
    next
}

fn apply_authorization(next: &mut State, auth: Authorization, now: DateTime<Utc>) {
    match auth {
        Authorization::Approved { amount } if amount >= next.amount => {
            next.authorized = next.amount;
            match next.capture_method {
                CaptureMethod::Automatic => {
                    next.captured = next.amount;
                    next.captured_at = Some(now);
                    next.status = Status::Succeeded;
                }
                CaptureMethod::Manual => next.status = Status::RequiresCapture,
            }
        }
        Authorization::Approved { amount } => {
            next.authorized = amount.clamp(0, next.amount);
            next.status = Status::PartiallyAuthorizedAndRequiresCapture;
        }
        Authorization::Declined { retryable } => {
            next.status = if retryable && next.attempts < next.max_attempts {
                Status::Declined
            } else {
                Status::Failed
            };
        }
        Authorization::ChallengeRequired => next.status = Status::RequiresCustomerAction,
        Authorization::ReviewRequired => next.status = Status::RequiresMerchantAction,
        Authorization::Pending => next.status = Status::Processing,
        Authorization::Refused => next.status = Status::Declined,
    }
}

/// A challenge (3-D Secure) completed by the buyer.
pub fn check_challenge(state: &State) -> Result<(), Refusal> {
    (state.status == Status::RequiresCustomerAction)
        .then_some(())
        .ok_or_else(|| refuse(state))
}

pub fn complete_challenge(state: &State, auth: Authorization, now: DateTime<Utc>) -> State {
    let mut next = state.clone();
    apply_authorization(&mut next, auth, now);
    next
}

/// The amount a capture takes: the asked amount, or the whole capturable remainder.
pub fn capture_amount(state: &State, asked: Option<i64>) -> Result<i64, Refusal> {
    if !state.status.is_capturable() {
        return Err(refuse(state));
    }
    let capturable = state.capturable();
    match asked {
        None => Ok(capturable),
        Some(a) if a <= 0 => Err(Refusal::AmountNotPositive),
        Some(a) if a > capturable => Err(Refusal::AmountExceedsCapturable(capturable)),
        Some(a) => Ok(a),
    }
}

/// The state after the processor captured `amount` (checked by `capture_amount`).
pub fn capture(
    state: &State,
    amount: i64,
    final_capture: bool,
    now: DateTime<Utc>,
) -> Result<State, Refusal> {
    let amount = capture_amount(state, Some(amount))?;
    let mut next = state.clone();
    next.captured = state.captured + amount;
    debug_assert!(
        next.captured <= next.authorized && next.authorized <= next.amount,
        "captured ≤ authorized ≤ amount"
    );
    next.captured_at = Some(now);
    next.status = if next.captured == next.authorized && next.authorized == next.amount {
        Status::Succeeded
    } else if next.captured == next.authorized {
        // The whole (partial) authorization is captured: nothing is left to take.
        Status::PartiallyCaptured
    } else if final_capture {
        Status::PartiallyCaptured
    } else {
        Status::PartiallyCapturedAndCapturable
    };
    Ok(next)
}

/// How long after a capture the processor still lets it be voided.
pub const VOID_WINDOW: i64 = 30 * 60;

/// Whether and how the payment can be cancelled now.
pub fn cancel_kind(state: &State, now: DateTime<Utc>) -> Result<CancelKind, Refusal> {
    Ok(match state.status {
        Status::RequiresPaymentMethod
        | Status::RequiresConfirmation
        | Status::Declined
        | Status::RequiresCustomerAction => CancelKind::Local,
        Status::RequiresMerchantAction
        | Status::RequiresCapture
        | Status::PartiallyAuthorizedAndRequiresCapture => CancelKind::Void,
        Status::PartiallyCapturedAndCapturable => CancelKind::ReleaseRemainder,
        Status::Succeeded | Status::PartiallyCaptured => {
            if state.refunded > 0 {
                return Err(Refusal::RefundExists);
            }
            let recent = state
                .captured_at
                .is_some_and(|at| now - at <= Duration::seconds(VOID_WINDOW));
            if !recent {
                return Err(Refusal::VoidWindowClosed);
            }
            CancelKind::VoidCapture
        }
        _ => return Err(refuse(state)),
    })
}

/// Invariant: what goes back to the buyer — refunds, what disputes gave them, a voided capture —
/// never exceeds what was captured: a capture is not voided while a dispute is open (409
/// `dispute_open`) or after one gave the buyer its amount.
pub fn cancel(state: &State, now: DateTime<Utc>, disputed: &Disputed) -> Result<State, Refusal> {
    let kind = cancel_kind(state, now)?;
    if kind == CancelKind::VoidCapture {
        if let Some(id) = &disputed.open {
            return Err(Refusal::DisputeOpen(id.clone()));
        }
        if disputed.kept_by_buyer > 0 {
            return Err(refuse(state));
        }
    }
    let mut next = state.clone();
    next.status = match kind {
        CancelKind::Local | CancelKind::Void => Status::Cancelled,
        CancelKind::ReleaseRemainder => Status::PartiallyCaptured,
        CancelKind::VoidCapture => Status::CancelledPostCapture,
    };
    Ok(next)
}

/// Applies what the processor reports. Agreement settles pending states; a report that no
/// transition explains makes the payment `conflicted`.
pub fn settle(state: &State, view: ProcessorView, now: DateTime<Utc>) -> State {
    let mut next = state.clone();
    // A challenge may also end at the processor (3-D Secure run by the processor's own
    // script): its outcome settles the payment as an answer would.
    let pending = matches!(
        state.status,
        Status::Processing | Status::RequiresMerchantAction | Status::RequiresCustomerAction
    );
    match view {
        ProcessorView::Pending | ProcessorView::Unchanged | ProcessorView::Unknown => {}
        ProcessorView::Authorized { amount } if pending => {
            apply_authorization(&mut next, Authorization::Approved { amount }, now);
        }
        ProcessorView::Captured { amount } if pending && amount == state.amount => {
            next.authorized = amount;
            next.captured = amount;
            next.captured_at = Some(now);
            next.status = Status::Succeeded;
        }
        ProcessorView::Declined { retryable } if pending => {
            apply_authorization(&mut next, Authorization::Declined { retryable }, now);
        }
        ProcessorView::Voided | ProcessorView::Lapsed if pending => next.status = Status::Cancelled,
        // An off-session charge whose answer was lost, found waiting for the buyer to
        // authenticate it: the buyer is asked, as the answer would have had it.
        ProcessorView::AwaitsBuyer if state.status == Status::Processing => {
            apply_authorization(&mut next, Authorization::ChallengeRequired, now);
        }
        // Still waiting for the buyer; or declined here before payd offered the buyer a way.
        ProcessorView::AwaitsBuyer
            if matches!(
                state.status,
                Status::RequiresCustomerAction | Status::Declined | Status::Failed
            ) => {}
        // The processor released the authorization itself (Stripe cancels one unused for 7
        // days, or its dashboard did): what was held is gone, what was captured stays. One
        // whose window closed expired, as payd's own expiry would have made it.
        ProcessorView::Voided | ProcessorView::Lapsed if state.status.is_capturable() => {
            next.status = match view {
                _ if state.captured > 0 => Status::PartiallyCaptured,
                ProcessorView::Lapsed => Status::Expired,
                _ => Status::Cancelled,
            };
        }
        // Captured at the processor (its dashboard) and not yet here: the capture is
        // recorded, final (the rest of the authorization is released there).
        ProcessorView::Captured { amount }
            if state.status.is_capturable()
                && amount > state.captured
                && amount <= state.authorized =>
        {
            if let Ok(captured) = capture(state, amount - state.captured, true, now) {
                next = captured;
            }
        }
        // The processor agrees with a settled record: nothing to do.
        ProcessorView::Authorized { amount }
            if state.status.is_capturable() && amount == state.authorized => {}
        ProcessorView::Captured { amount }
            if amount == state.captured
                && (state.status.is_capturable()
                    || matches!(state.status, Status::Succeeded | Status::PartiallyCaptured)) => {}
        ProcessorView::Voided | ProcessorView::Lapsed
            if matches!(
                state.status,
                Status::Cancelled | Status::CancelledPostCapture | Status::Expired
            ) => {}
        ProcessorView::Declined { .. }
            if matches!(state.status, Status::Declined | Status::Failed) => {}
        _ => next.status = Status::Conflicted,
    }
    next
}

/// Why a payment expires now, if it does: unconfirmed past `expires_at`, or an
/// authorization not captured by `capture_before`.
pub fn expire(
    state: &State,
    now: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    capture_before: Option<DateTime<Utc>>,
) -> Option<State> {
    let mut next = state.clone();
    match state.status {
        s if (s.is_unconfirmed() || s == Status::RequiresCustomerAction) && now >= expires_at => {
            next.status = Status::Expired;
        }
        Status::RequiresCapture | Status::PartiallyAuthorizedAndRequiresCapture
            if capture_before.is_some_and(|at| now >= at) =>
        {
            next.status = Status::Expired;
        }
        // Captured funds stay captured; only the remainder lapses.
        Status::PartiallyCapturedAndCapturable if capture_before.is_some_and(|at| now >= at) => {
            next.status = Status::PartiallyCaptured;
        }
        _ => return None,
    }
    Some(next)
}

pub use payd_model::payments::Line;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fresh(amount: i64, method: CaptureMethod) -> State {
        State {
            status: Status::RequiresConfirmation,
            amount,
            capture_method: method,
            authorized: 0,
            captured: 0,
            refunded: 0,
            attempts: 0,
            max_attempts: 3,
            captured_at: None,
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn automatic_approval_succeeds_and_manual_waits_for_capture() {
        let s = confirm(
            &fresh(500, CaptureMethod::Automatic),
            Authorization::Approved { amount: 500 },
            now(),
        );
        assert_eq!((s.status, s.captured), (Status::Succeeded, 500));
        let s = confirm(
            &fresh(500, CaptureMethod::Manual),
            Authorization::Approved { amount: 500 },
            now(),
        );
        assert_eq!(
            (s.status, s.authorized, s.captured),
            (Status::RequiresCapture, 500, 0)
        );
    }

    #[test]
    fn an_authorization_the_processor_released_is_cancelled_and_one_that_lapsed_expired() {
        let held = confirm(
            &fresh(500, CaptureMethod::Manual),
            Authorization::Approved { amount: 500 },
            now(),
        );
        assert_eq!(
            settle(&held, ProcessorView::Voided, now()).status,
            Status::Cancelled
        );
        assert_eq!(
            settle(&held, ProcessorView::Lapsed, now()).status,
            Status::Expired
        );
        let part = capture(&held, 200, false, now()).unwrap();
        assert_eq!(
            settle(&part, ProcessorView::Lapsed, now()).status,
            Status::PartiallyCaptured,
            "what was captured stays"
        );
        let expired = settle(&held, ProcessorView::Lapsed, now());
        assert_eq!(settle(&expired, ProcessorView::Voided, now()), expired);
    }

    #[test]
    fn declines_are_retryable_until_max_attempts() {
        let mut s = fresh(500, CaptureMethod::Automatic);
        s = confirm(&s, Authorization::Declined { retryable: true }, now());
        assert_eq!(s.status, Status::Declined);
        s = confirm(&s, Authorization::Declined { retryable: true }, now());
        assert_eq!(s.status, Status::Declined);
        s = confirm(&s, Authorization::Declined { retryable: true }, now());
        assert_eq!(s.status, Status::Failed, "the third decline is final");
        let s = confirm(
            &fresh(500, CaptureMethod::Automatic),
            Authorization::Declined { retryable: false },
            now(),
        );
        assert_eq!(s.status, Status::Failed);
        assert_eq!(
            check_confirm(&s),
            Err(Refusal::InvalidState(Status::Failed))
        );
    }

    #[test]
    fn partial_captures_then_final() {
        let s = confirm(
            &fresh(500, CaptureMethod::Manual),
            Authorization::Approved { amount: 500 },
            now(),
        );
        let s = capture(&s, 100, false, now()).unwrap();
        assert_eq!(
            (s.status, s.captured),
            (Status::PartiallyCapturedAndCapturable, 100)
        );
        assert_eq!(
            capture_amount(&s, Some(401)),
            Err(Refusal::AmountExceedsCapturable(400))
        );
        assert_eq!(capture_amount(&s, Some(0)), Err(Refusal::AmountNotPositive));
        let s2 = capture(&s, 400, false, now()).unwrap();
        assert_eq!(s2.status, Status::Succeeded);
        let s3 = capture(&s, 100, true, now()).unwrap();
        assert_eq!((s3.status, s3.captured), (Status::PartiallyCaptured, 200));
        assert!(capture_amount(&s3, None).is_err());
    }

    #[test]
    fn partial_authorization_caps_captures() {
        let mut s = fresh(500, CaptureMethod::Automatic);
        s = confirm(&s, Authorization::Approved { amount: 250 }, now());
        assert_eq!(
            (s.status, s.authorized),
            (Status::PartiallyAuthorizedAndRequiresCapture, 250)
        );
        assert_eq!(capture_amount(&s, None), Ok(250));
        let s = capture(&s, 250, false, now()).unwrap();
        assert_eq!((s.status, s.captured), (Status::PartiallyCaptured, 250));
    }

    #[test]
    fn cancels() {
        let s = fresh(500, CaptureMethod::Manual);
        assert_eq!(
            cancel(&s, now(), &Disputed::default()).unwrap().status,
            Status::Cancelled
        );
        let auth = confirm(&s, Authorization::Approved { amount: 500 }, now());
        assert_eq!(cancel_kind(&auth, now()), Ok(CancelKind::Void));
        let part = capture(&auth, 100, false, now()).unwrap();
        assert_eq!(
            cancel(&part, now(), &Disputed::default()).unwrap().status,
            Status::PartiallyCaptured
        );
        let done = capture(&auth, 500, true, now()).unwrap();
        assert_eq!(
            cancel(&done, now() + Duration::minutes(5), &Disputed::default())
                .unwrap()
                .status,
            Status::CancelledPostCapture
        );
        assert_eq!(
            cancel(&done, now() + Duration::minutes(31), &Disputed::default()),
            Err(Refusal::VoidWindowClosed)
        );
        let refunded = State {
            refunded: 100,
            ..done.clone()
        };
        assert_eq!(
            cancel(
                &refunded,
                now() + Duration::minutes(5),
                &Disputed::default()
            ),
            Err(Refusal::RefundExists)
        );
        let processing = confirm(&s, Authorization::Pending, now());
        assert!(cancel(&processing, now(), &Disputed::default()).is_err());
    }

    #[test]
    fn settling_and_conflicts() {
        let p = confirm(
            &fresh(500, CaptureMethod::Automatic),
            Authorization::Pending,
            now(),
        );
        assert_eq!(
            settle(&p, ProcessorView::Pending, now()).status,
            Status::Processing
        );
        assert_eq!(
            settle(&p, ProcessorView::Authorized { amount: 500 }, now()).status,
            Status::Succeeded
        );
        assert_eq!(
            settle(&p, ProcessorView::Captured { amount: 400 }, now()).status,
            Status::Conflicted
        );
        let cancelled = cancel(
            &fresh(500, CaptureMethod::Manual),
            now(),
            &Disputed::default(),
        )
        .unwrap();
        assert_eq!(
            settle(&cancelled, ProcessorView::Captured { amount: 500 }, now()).status,
            Status::Conflicted
        );
        let done = confirm(
            &fresh(500, CaptureMethod::Automatic),
            Authorization::Approved { amount: 500 },
            now(),
        );
        assert_eq!(
            settle(&done, ProcessorView::Captured { amount: 500 }, now()),
            done
        );
    }

    #[test]
    fn a_capture_is_not_voided_against_a_dispute_nor_disputed_once_voided() {
        let done = confirm(
            &fresh(500, CaptureMethod::Automatic),
            Authorization::Approved { amount: 500 },
            now(),
        );
        assert_eq!(dispute_amount(&done), Some(500));
        let open = Disputed {
            open: Some("dp_1".into()),
            kept_by_buyer: 0,
        };
        assert_eq!(
            cancel(&done, now(), &open),
            Err(Refusal::DisputeOpen("dp_1".into()))
        );
        let lost = Disputed {
            open: None,
            kept_by_buyer: 500,
        };
        assert_eq!(
            cancel(&done, now(), &lost),
            Err(Refusal::InvalidState(Status::Succeeded))
        );
        let voided = cancel(&done, now(), &Disputed::default()).unwrap();
        assert_eq!(voided.status, Status::CancelledPostCapture);
        assert_eq!(dispute_amount(&voided), None, "nothing left to dispute");
        // An open dispute does not stop a cancel that moves no captured money.
        let held = confirm(
            &fresh(500, CaptureMethod::Manual),
            Authorization::Approved { amount: 500 },
            now(),
        );
        assert_eq!(
            cancel(&held, now(), &open).unwrap().status,
            Status::Cancelled
        );
    }

    #[test]
    fn expiry() {
        let s = fresh(500, CaptureMethod::Manual);
        let at = now() + Duration::hours(24);
        assert_eq!(expire(&s, now(), at, None), None);
        assert_eq!(expire(&s, at, at, None).unwrap().status, Status::Expired);
        let auth = confirm(&s, Authorization::Approved { amount: 500 }, now());
        let before = Some(now() + Duration::days(7));
        assert_eq!(
            expire(&auth, now() + Duration::days(8), at, before)
                .unwrap()
                .status,
            Status::Expired
        );
        let part = capture(&auth, 100, false, now()).unwrap();
        assert_eq!(
            expire(&part, now() + Duration::days(8), at, before)
                .unwrap()
                .status,
            Status::PartiallyCaptured
        );
    }

    /// A confirm the processor refused untried (the merchant's configuration) leaves the
    /// payment `declined` however often it happens; a decline after it still counts.
    #[test]
    fn a_refused_confirm_uses_up_no_attempt() {
        let mut s = fresh(1000, CaptureMethod::Automatic);
        for _ in 0..5 {
            s = confirm(&s, Authorization::Refused, now());
        }
        assert_eq!((s.status, s.attempts), (Status::Declined, 0));
        let s = confirm(&s, Authorization::Declined { retryable: true }, now());
        assert_eq!((s.status, s.attempts), (Status::Declined, 1));
    }

    #[derive(Debug, Clone)]
    enum Cmd {
        Confirm(u8, i64),
        Capture(Option<i64>, bool),
        Cancel(i64),
        Settle(u8, i64),
        Expire(i64),
        Challenge(bool),
        /// 0: the buyer disputes (once, if anything can be disputed); 1: the buyer wins it;
        /// 2: the merchant wins it.
        Dispute(u8),
    }

    fn cmd() -> impl Strategy<Value = Cmd> {
        prop_oneof![
            (0u8..6, 0i64..1200).prop_map(|(k, a)| Cmd::Confirm(k, a)),
            (proptest::option::of(-10i64..1200), any::<bool>())
                .prop_map(|(a, f)| Cmd::Capture(a, f)),
            (0i64..3600).prop_map(Cmd::Cancel),
            (0u8..8, 0i64..1200).prop_map(|(k, a)| Cmd::Settle(k, a)),
            (0i64..20).prop_map(Cmd::Expire),
            any::<bool>().prop_map(Cmd::Challenge),
            (0u8..3).prop_map(Cmd::Dispute),
        ]
    }

    fn auth(kind: u8, amount: i64) -> Authorization {
        match kind {
            0 => Authorization::Approved { amount },
            1 => Authorization::Declined {
                retryable: amount % 2 == 0,
            },
            2 => Authorization::ChallengeRequired,
            3 => Authorization::ReviewRequired,
            4 => Authorization::Refused,
            _ => Authorization::Pending,
        }
    }

    proptest! {
        // Cheap (about 30 µs a case), and a void against an open dispute needs a capture, a
        // dispute and a cancel inside the void window in one sequence: many cases find it.
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Any sequence of commands keeps the money invariants, never leaves a terminal
        /// status by a command, and every status change is observable (so the actor writes
        /// a history row for it).
        #[test]
        fn commands_keep_the_invariants(
            amount in 1i64..1000,
            manual in any::<bool>(),
            cmds in proptest::collection::vec(cmd(), 1..25),
        ) {
            let method = if manual { CaptureMethod::Manual } else { CaptureMethod::Automatic };
            let mut s = fresh(amount, method);
            let t0 = now();
            let expires_at = t0 + Duration::hours(24);
            let capture_before = Some(t0 + Duration::days(7));
            // The dispute's amount while open, what the buyer kept, and whether one opened.
            let (mut open, mut kept, mut disputed_once) = (None::<i64>, 0i64, false);
            for (i, c) in cmds.into_iter().enumerate() {
                let t = t0 + Duration::minutes(i as i64);
                let before = s.clone();
                let next = match c {
                    Cmd::Confirm(k, a) => check_confirm(&s).ok().map(|_| confirm(&s, auth(k, a.min(amount)), t)),
                    Cmd::Challenge(ok) => check_challenge(&s).ok().map(|_| complete_challenge(
                        &s,
                        if ok { Authorization::Approved { amount } } else { Authorization::Declined { retryable: false } },
                        t,
                    )),
                    Cmd::Capture(a, f) => capture_amount(&s, a).ok().and_then(|a| capture(&s, a, f, t).ok()),
                    Cmd::Cancel(secs) => {
                        let disputed = Disputed { open: open.map(|_| "dp".to_owned()), kept_by_buyer: kept };
                        let result = cancel(&s, t + Duration::seconds(secs), &disputed);
                        if open.is_some() && cancel_kind(&s, t + Duration::seconds(secs)) == Ok(CancelKind::VoidCapture) {
                            prop_assert_eq!(&result, &Err(Refusal::DisputeOpen("dp".to_owned())));
                        }
                        result.ok()
                    }
                    Cmd::Dispute(0) => {
                        if let (false, Some(a)) = (disputed_once, dispute_amount(&s)) {
                            (open, disputed_once) = (Some(a), true);
                        }
                        None
                    }
                    Cmd::Dispute(k) => {
                        if let Some(a) = open.take() {
                            kept += if k == 1 { a } else { 0 };
                        }
                        None
                    }
                    Cmd::Settle(k, a) => Some(settle(&s, match k {
                        0 => ProcessorView::Pending,
                        1 => ProcessorView::Unchanged,
                        2 => ProcessorView::Authorized { amount: a.min(amount) },
                        3 => ProcessorView::Captured { amount: a.min(amount) },
                        4 => ProcessorView::Declined { retryable: a % 2 == 0 },
                        5 => ProcessorView::Lapsed,
                        6 => ProcessorView::AwaitsBuyer,
                        _ => ProcessorView::Voided,
                    }, t)),
                    Cmd::Expire(days) => expire(&s, t + Duration::days(days), expires_at, capture_before),
                };
                if let Some(next) = next {
                    if before.status.is_terminal() && next.status != before.status {
                        prop_assert_eq!(next.status, Status::Conflicted, "left terminal {:?}", before.status);
                        prop_assert!(before.status != Status::Conflicted);
                    }
                    s = next;
                }
                prop_assert!(0 <= s.refunded && s.refunded <= s.captured);
                prop_assert!(s.captured <= s.authorized, "captured {} > authorized {}", s.captured, s.authorized);
                prop_assert!(s.authorized <= s.amount);
                prop_assert!(s.captured >= before.captured, "captured never shrinks");
                let voided = if s.status == Status::CancelledPostCapture { s.captured } else { 0 };
                prop_assert!(
                    s.refunded + kept + open.unwrap_or(0) + voided <= s.captured,
                    "back to the buyer: refunded {}, kept {}, disputed {:?}, voided {} > captured {}",
                    s.refunded, kept, open, voided, s.captured
                );
            }
        }
    }
}
