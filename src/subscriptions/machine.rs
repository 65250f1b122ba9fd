//! The subscription state machine, pure: statuses and their transitions, billing periods, and
//! the retry schedule of a cycle that could not be collected.
//!
//! ```text
//! (create: the first cycle paid) ──▶ active ⇄ paused
//!                                      │  ▲
//!          retries run out ─────────── ▼  │ the open cycle is paid
//!                                     unpaid
//! any of active, paused, unpaid ──cancel──▶ cancelled
//! active or paused ──cancel at period end──▶ (flag) ──period ends──▶ cancelled
//!                                              └──resume──▶ (flag cleared)
//! ```
//!
//! Periods are counted from the subscription's anchor, never chained: the `k`-th period ends
//! `k × interval_count` intervals after the anchor, so a subscription anchored on 31 January
//! renews on 28 (29) February, then on 31 March (months without the day end on their last day).

use chrono::{DateTime, Duration, Months, Utc};

use crate::money;

pub use payd_model::subscriptions::Status;

pub use payd_model::catalog::Interval;

/// The end of the `k`-th period (`k ≥ 1`) of a subscription anchored at `anchor` billing every
/// `count` `interval`s; `None` past the calendar's end.
pub fn period_end(
    anchor: DateTime<Utc>,
    interval: Interval,
    count: i64,
    k: i64,
) -> Option<DateTime<Utc>> {
    let n = count.checked_mul(k)?;
    match interval {
        Interval::Day => anchor.checked_add_signed(Duration::try_days(n)?),
        Interval::Week => anchor.checked_add_signed(Duration::try_days(n.checked_mul(7)?)?),
        Interval::Month => anchor.checked_add_months(Months::new(u32::try_from(n).ok()?)),
        Interval::Year => {
            anchor.checked_add_months(Months::new(u32::try_from(n.checked_mul(12)?).ok()?))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the subscription is {}; {what}", .status.as_str())]
    InvalidState { status: Status, what: &'static str },
}

fn refuse<T>(status: Status, what: &'static str) -> Result<T, Refusal> {
    Err(Refusal::InvalidState { status, what })
}

/// What a command does to the status and the `cancel_at_period_end` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Next {
    pub status: Status,
    pub cancel_at_period_end: bool,
    /// The event this transition announces.
    pub event: &'static str,
}

/// Pausing: only an active subscription (a scheduled cancellation stays scheduled).
pub fn pause(s: Status, cancel_at_period_end: bool) -> Result<Next, Refusal> {
    match s {
        Status::Active => Ok(Next {
            status: Status::Paused,
            cancel_at_period_end,
            event: "subscription_paused",
        }),
        other => refuse(other, "only an active subscription can be paused"),
    }
}

/// Resuming: a paused subscription becomes active; on an active one, a cancellation scheduled
/// for the period's end is undone. (An unpaid one is resumed by paying its open cycle.)
pub fn resume(s: Status, cancel_at_period_end: bool) -> Result<Next, Refusal> {
    match (s, cancel_at_period_end) {
        (Status::Paused, _) | (Status::Active, true) => Ok(Next {
            status: Status::Active,
            cancel_at_period_end: false,
            event: "subscription_resumed",
        }),
        (other, _) => refuse(
            other,
            "resume needs a paused subscription, or an active one with a cancellation scheduled",
        ),
    }
}

/// Cancelling, now or at the period's end (which needs a subscription that still renews).
pub fn cancel(s: Status, at_period_end: bool, already_scheduled: bool) -> Result<Next, Refusal> {
    if s.is_final() {
        return refuse(s, "it cannot be cancelled again");
    }
    if at_period_end {
        if !matches!(s, Status::Active | Status::Paused) {
            return refuse(
                s,
                "only an active or paused subscription can end with its period",
            );
        }
        if already_scheduled {
            return refuse(s, "its cancellation at period end is already scheduled");
        }
        return Ok(Next {
            status: s,
            cancel_at_period_end: true,
            event: "subscription_cancelled",
        });
    }
    Ok(Next {
        status: Status::Cancelled,
        cancel_at_period_end: false,
        event: "subscription_cancelled",
    })
}

/// A cycle was paid: active again. The first activation announces `subscription_active`; an
/// unpaid subscription that pays `subscription_resumed`.
pub fn paid(s: Status, ever_active: bool) -> Option<Next> {
    let event = match s {
        _ if !ever_active => "subscription_active",
        Status::Unpaid => "subscription_resumed",
        _ => return None,
    };
    Some(Next {
        status: Status::Active,
        cancel_at_period_end: false,
        event,
    })
    .filter(|_| !s.is_final())
}

/// After `attempts` failed attempts at a cycle: when to try again (`Some(delay)`), or `None`
/// when the schedule has run out (the subscription becomes `unpaid`).
pub fn retry_after(attempts: i64, schedule_days: &[u32]) -> Option<Duration> {
    let i = usize::try_from(attempts).ok()?.checked_sub(1)?;
    schedule_days.get(i).map(|d| Duration::days(i64::from(*d)))
}

/// How long to wait before looking again at a charge still on its way, `waited` after its
/// attempt began: a minute for a renewal (`processing` at the processor); for a hosted
/// checkout the buyer has not finished, a tenth of the wait so far, from a minute up to an
/// hour (the buyer has until `confirm_within`; a test clock advanced a month steps through
/// about seventy looks, not 1,440).
pub fn charge_check(status: Status, waited: Duration) -> Duration {
    let minute = Duration::minutes(1);
    match status {
        Status::Created => (waited / 10).clamp(minute, Duration::hours(1)),
        _ => minute,
    }
}

/// A fixed term whose last period has ended: `in_active`, announced as
/// `subscription_expired`. `period` is the number of the period that ended.
pub fn term_ended(s: Status, period: i64, term_cycles: Option<i64>) -> Option<Next> {
    let ended = !s.is_final() && term_cycles.is_some_and(|n| period >= n);
    ended.then_some(EXPIRED)
}

/// Retries ran out: `unpaid`, announced as `subscription_past_due`.
pub fn past_due(s: Status) -> Option<Next> {
    (s == Status::Active).then_some(Next {
        status: Status::Unpaid,
        cancel_at_period_end: false,
        event: "subscription_past_due",
    })
}

/// How long a charge in flight whose attempt set no check time waits before the next tick
/// looks at it (a crash or a lost answer between recording the attempt and its outcome).
pub const CHARGE_CHECK: Duration = Duration::seconds(60);

/// What decides a subscription's due moments, read off its row and its open cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub status: Status,
    /// A `created` subscription expires unpaid then.
    pub confirm_by: DateTime<Utc>,
    pub period_end: DateTime<Utc>,
    pub cancel_at_period_end: bool,
    /// The number of the current period, and how many a fixed term has.
    pub period: i64,
    pub term_cycles: Option<i64>,
    /// The cycle being collected, if any.
    pub open: Option<OpenCycle>,
}

/// The cycle a subscription is collecting, as far as its due moments go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenCycle {
    /// An attempt was recorded and its outcome is not known yet.
    pub charging: bool,
    /// When the charge in flight is looked at again, or a failed cycle is retried.
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

/// What a due moment does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// The charge in flight is settled with the payment it recorded.
    Settle,
    /// A `created` subscription's time to confirm ran out: its first charge is withdrawn (or
    /// settled, when the buyer paid it) and it expires.
    Expire,
    /// A failed cycle is tried again.
    Retry,
    /// The period ended and the subscription ends with it (`Next` says how).
    End(Next),
    /// The period ended: an active subscription bills the next one.
    Renew,
    /// The period ended: a paused subscription's next one begins, without a charge.
    Pass,
}

/// What is due on the subscription at `now`, and when its next due moment is (the same at any
/// `now`; at or after it the step is never `Nothing`, before it always). One function decides
/// both, so the tick and its job's time cannot disagree.
pub fn due(t: &Timing, now: DateTime<Utc>) -> (Step, Option<DateTime<Utc>>) {
    let at = |when: Option<DateTime<Utc>>, step: Step| match when {
        Some(w) if now >= w => (step, when),
        _ => (Step::Nothing, when),
    };
    // A charge in flight is left to its maker until its check time; after that (a crash, a
    // lost answer) it is settled with the same payment. Nothing else happens meanwhile: a
    // period's end waits for its outcome. (An ended subscription's charge is left alone.)
    if let Some(c) = t.open.filter(|c| c.charging && !t.status.is_final()) {
        let check = c.next_attempt_at.unwrap_or(c.updated_at + CHARGE_CHECK);
        let expiry = match now >= t.confirm_by {
            true => Step::Expire,
            false => Step::Settle,
        };
        return match t.status {
            // Past its deadline, a first charge still on its way is withdrawn (or settled), not
            // left to its check; one begun after the deadline waits for its check.
            Status::Created if c.updated_at < t.confirm_by => {
                at(Some(check.min(t.confirm_by)), expiry)
            }
            Status::Created => at(Some(check), Step::Expire),
            _ => at(Some(check), Step::Settle),
        };
    }
    let (retry, period) = match t.status {
        Status::Created => return at(Some(t.confirm_by), Step::Expire),
        // An unpaid subscription renews again once its open cycle is paid (on resume).
        Status::Unpaid => return (Step::Nothing, None),
        // A paused one's periods pass; its retries wait for the resume.
        Status::Paused => (None, period_ended(t).unwrap_or(Step::Pass)),
        Status::Active => {
            let retry = t.open.and_then(|c| c.next_attempt_at);
            // An active one with a cycle being collected does not renew: its retries run (one
            // after the period's end starts a new period), and the period's end matters only
            // when it ends the subscription.
            let period = match (period_ended(t), t.open) {
                (Some(end), _) => end,
                (None, Some(_)) => return at(retry, Step::Retry),
                (None, None) => Step::Renew,
            };
            (retry, period)
        }
        Status::Cancelled | Status::InActive => return (Step::Nothing, None),
    };
    // A retry comes first when both are due (one after the period's end starts a new period).
    let when = [retry, Some(t.period_end)].into_iter().flatten().min();
    let step = match (retry.is_some_and(|r| now >= r), now >= t.period_end) {
        (true, _) => Step::Retry,
        (false, true) => period,
        (false, false) => Step::Nothing,
    };
    (step, when)
}

/// The step that ends a subscription with its period: a cancellation scheduled for it, or a
/// fixed term's last period.
fn period_ended(t: &Timing) -> Option<Step> {
    let ends = match t.cancel_at_period_end {
        true => cancel(t.status, false, false).ok(),
        false => term_ended(t.status, t.period, t.term_cycles),
    };
    ends.map(Step::End)
}

/// A `created` subscription nobody paid in time, or a fixed term that ran out: `in_active`,
/// announced as `subscription_expired`.
pub const EXPIRED: Next = Next {
    status: Status::InActive,
    cancel_at_period_end: false,
    event: "subscription_expired",
};

/// How a plan change settles the part of the period already paid for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proration {
    /// The difference for the rest of the period is added to the next renewal.
    CreateProrations,
    /// The difference is charged now (a credit goes to the next renewal).
    AlwaysInvoice,
    /// Nothing for the rest of the period: the next renewal charges the new plan.
    None,
}

impl Proration {
    pub fn parse(s: &str) -> Option<Proration> {
        match s {
            "create_prorations" => Some(Proration::CreateProrations),
            "always_invoice" => Some(Proration::AlwaysInvoice),
            "none" => Some(Proration::None),
            _ => None,
        }
    }
}

/// `amount × remaining / total`, rounded half up: the one rounding rule of prorations.
pub fn prorate(amount: i64, remaining_secs: i64, total_secs: i64) -> i64 {
    if total_secs <= 0 || remaining_secs <= 0 {
        return 0;
    }
    let remaining = remaining_secs.min(total_secs);
    money::round_half_up(
        i128::from(amount) * i128::from(remaining),
        i128::from(total_secs),
    )
}

/// What changing a plan from `old` to `new` (amounts per period) at `now`, inside the period
/// `[start, end)`, is worth for the rest of the period: the new plan's share less the old
/// plan's, each prorated to the second and rounded on its own. Positive: the buyer owes it;
/// negative: a credit.
pub fn proration(
    old: i64,
    new: i64,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> i64 {
    let total = (end - start).num_seconds();
    let remaining = (end - now).num_seconds();
    prorate(new, remaining, total) - prorate(old, remaining, total)
}

/// The actions a subscription allows now (`GET …/capabilities`).
pub fn actions(s: Status, cancel_at_period_end: bool) -> Vec<&'static str> {
    match s {
        Status::Active if cancel_at_period_end => vec!["pause", "resume", "cancel"],
        Status::Active => vec!["pause", "cancel", "cancel_at_period_end"],
        Status::Paused if cancel_at_period_end => vec!["resume", "cancel"],
        Status::Paused => vec!["resume", "cancel", "cancel_at_period_end"],
        Status::Unpaid => vec!["resume", "cancel"],
        Status::Created => vec!["cancel"],
        Status::Cancelled | Status::InActive => vec![],
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_fixed_term_ends_with_its_last_period() {
        assert_eq!(term_ended(Status::Active, 2, Some(3)), None);
        let ended = term_ended(Status::Active, 3, Some(3)).map(|n| (n.status, n.event));
        assert_eq!(ended, Some((Status::InActive, "subscription_expired")));
        assert!(
            term_ended(Status::Paused, 3, Some(3)).is_some(),
            "paused periods count"
        );
        assert_eq!(term_ended(Status::Active, 300, None), None);
        assert_eq!(term_ended(Status::Cancelled, 3, Some(3)), None);
    }

    #[test]
    fn a_checkout_wait_is_looked_at_less_and_less() {
        let at = |m| charge_check(Status::Created, Duration::minutes(m));
        assert_eq!(at(0), Duration::minutes(1));
        assert_eq!(at(100), Duration::minutes(10));
        assert_eq!(at(24 * 60), Duration::hours(1));
        assert_eq!(
            charge_check(Status::Active, Duration::hours(5)),
            Duration::minutes(1)
        );
    }

    #[test]
    fn month_ends_do_not_drift() {
        let jan31 = at("2027-01-31T09:00:00Z");
        assert_eq!(
            period_end(jan31, Interval::Month, 1, 1),
            Some(at("2027-02-28T09:00:00Z"))
        );
        assert_eq!(
            period_end(jan31, Interval::Month, 1, 2),
            Some(at("2027-03-31T09:00:00Z"))
        );
        assert_eq!(
            period_end(jan31, Interval::Year, 1, 1),
            Some(at("2028-01-31T09:00:00Z"))
        );
        assert_eq!(
            period_end(jan31, Interval::Week, 2, 1),
            Some(at("2027-02-14T09:00:00Z"))
        );
    }

    #[test]
    fn prorations_round_half_up_to_the_minor_unit() {
        let start = at("2027-01-01T00:00:00Z");
        let end = at("2027-01-31T00:00:00Z");
        // Half the period left: 3 000 → 4 500 owes half of 1 500.
        assert_eq!(
            proration(3000, 4500, start, end, at("2027-01-16T00:00:00Z")),
            750
        );
        // A third left: 1 000 / 3 = 333.33 → 333; 2 000 / 3 = 666.67 → 667.
        let third = start + (end - start) * 2 / 3;
        assert_eq!(
            prorate(
                1000,
                (end - third).num_seconds(),
                (end - start).num_seconds()
            ),
            333
        );
        assert_eq!(proration(1000, 2000, start, end, third), 667 - 333);
        assert_eq!(proration(2000, 1000, start, end, third), 333 - 667);
        assert_eq!(proration(1000, 2000, start, end, end), 0);
    }

    #[test]
    fn retries_follow_the_schedule_then_run_out() {
        let s = [1, 3, 5];
        assert_eq!(retry_after(1, &s), Some(Duration::days(1)));
        assert_eq!(retry_after(3, &s), Some(Duration::days(5)));
        assert_eq!(retry_after(4, &s), None);
        assert_eq!(retry_after(0, &s), None);
    }

    fn timing(status: Status) -> Timing {
        Timing {
            status,
            confirm_by: at("2027-01-02T00:00:00Z"),
            period_end: at("2027-02-01T00:00:00Z"),
            cancel_at_period_end: false,
            period: 1,
            term_cycles: None,
            open: None,
        }
    }

    #[test]
    fn a_period_end_renews_passes_or_ends() {
        let end = at("2027-02-01T00:00:00Z");
        let before = end - Duration::seconds(1);
        assert_eq!(
            due(&timing(Status::Active), before),
            (Step::Nothing, Some(end))
        );
        assert_eq!(due(&timing(Status::Active), end).0, Step::Renew);
        assert_eq!(due(&timing(Status::Paused), end).0, Step::Pass);
        let cancelling = Timing {
            cancel_at_period_end: true,
            ..timing(Status::Paused)
        };
        let Step::End(next) = due(&cancelling, end).0 else {
            panic!("a scheduled cancellation ends the subscription");
        };
        assert_eq!(next.status, Status::Cancelled);
        let last = Timing {
            term_cycles: Some(1),
            ..timing(Status::Active)
        };
        assert!(matches!(due(&last, end).0, Step::End(n) if n.status == Status::InActive));
        assert_eq!(due(&timing(Status::Unpaid), end), (Step::Nothing, None));
        assert_eq!(due(&timing(Status::Cancelled), end), (Step::Nothing, None));
    }

    #[test]
    fn a_charge_in_flight_waits_for_its_check_even_past_the_period_end() {
        let started = at("2027-02-01T00:00:00Z") - Duration::seconds(30);
        let t = Timing {
            cancel_at_period_end: true,
            open: Some(OpenCycle {
                charging: true,
                next_attempt_at: None,
                updated_at: started,
            }),
            ..timing(Status::Active)
        };
        let check = started + CHARGE_CHECK;
        assert_eq!(
            due(&t, check - Duration::seconds(1)),
            (Step::Nothing, Some(check))
        );
        assert_eq!(due(&t, check).0, Step::Settle);
    }

    #[test]
    fn a_first_charge_is_settled_until_the_deadline_then_withdrawn() {
        let deadline = at("2027-01-02T00:00:00Z");
        let checking = |updated_at, next_attempt_at| Timing {
            open: Some(OpenCycle {
                charging: true,
                next_attempt_at,
                updated_at,
            }),
            ..timing(Status::Created)
        };
        let early = checking(deadline - Duration::hours(5), None);
        let check = deadline - Duration::hours(5) + CHARGE_CHECK;
        assert_eq!(due(&early, check), (Step::Settle, Some(check)));
        // Its next look falls after the deadline: the deadline comes first.
        let late_look = checking(
            deadline - Duration::hours(5),
            Some(deadline + Duration::hours(1)),
        );
        assert_eq!(due(&late_look, deadline), (Step::Expire, Some(deadline)));
        // Begun after the deadline (confirmed late): its check, then the expiry's withdrawal.
        let begun_late = checking(deadline + Duration::hours(1), None);
        let check = deadline + Duration::hours(1) + CHARGE_CHECK;
        assert_eq!(due(&begun_late, check), (Step::Expire, Some(check)));
        assert_eq!(due(&timing(Status::Created), deadline).0, Step::Expire);
    }

    #[test]
    fn a_retry_due_with_the_period_end_comes_first_and_a_paused_one_waits() {
        let end = at("2027-02-01T00:00:00Z");
        let failed = |status, retry| Timing {
            open: Some(OpenCycle {
                charging: false,
                next_attempt_at: Some(retry),
                updated_at: end - Duration::days(3),
            }),
            ..timing(status)
        };
        let late = failed(Status::Active, end + Duration::days(1));
        // Not renewed while its cycle is collected: the retry is its next moment.
        assert_eq!(
            due(&late, end),
            (Step::Nothing, Some(end + Duration::days(1)))
        );
        let ending = Timing {
            cancel_at_period_end: true,
            ..failed(Status::Active, end)
        };
        assert_eq!(due(&ending, end).0, Step::Retry);
        let paused = failed(Status::Paused, end - Duration::days(1));
        assert_eq!(
            due(&paused, end - Duration::days(1)),
            (Step::Nothing, Some(end))
        );
    }

    fn instant() -> impl Strategy<Value = DateTime<Utc>> {
        (-5_000i64..5_000).prop_map(|m| at("2027-01-15T00:00:00Z") + Duration::minutes(m))
    }

    fn any_timing() -> impl Strategy<Value = Timing> {
        let open = (any::<bool>(), prop::option::of(instant()), instant()).prop_map(
            |(charging, next_attempt_at, updated_at)| OpenCycle {
                charging,
                next_attempt_at,
                updated_at,
            },
        );
        (
            prop::sample::select(Status::ALL.to_vec()),
            instant(),
            instant(),
            any::<bool>(),
            (1i64..4, prop::option::of(1i64..4)),
            prop::option::of(open),
        )
            .prop_map(
                |(
                    status,
                    confirm_by,
                    period_end,
                    cancel_at_period_end,
                    (period, term_cycles),
                    open,
                )| {
                    Timing {
                        status,
                        confirm_by,
                        period_end,
                        cancel_at_period_end,
                        period,
                        term_cycles,
                        open,
                    }
                },
            )
    }

    #[derive(Debug, Clone)]
    enum Cmd {
        Pause,
        Resume,
        Cancel(bool),
        Paid,
        PastDue,
    }

    fn cmd() -> impl Strategy<Value = Cmd> {
        prop_oneof![
            Just(Cmd::Pause),
            Just(Cmd::Resume),
            any::<bool>().prop_map(Cmd::Cancel),
            Just(Cmd::Paid),
            Just(Cmd::PastDue),
        ]
    }

    proptest! {
        /// Nothing leads out of a final status, `subscription_active` is announced once, and a
        /// scheduled cancellation only exists on a subscription that still renews.
        #[test]
        fn final_statuses_stay_and_activation_is_announced_once(cmds in prop::collection::vec(cmd(), 0..40)) {
            let (mut s, mut flag, mut ever, mut activations) = (Status::Active, false, true, 0);
            if cmds.len() % 2 == 0 {
                (s, ever) = (Status::Created, false);
            }
            for c in &cmds {
                let next = match c {
                    Cmd::Pause => pause(s, flag).ok(),
                    Cmd::Resume => resume(s, flag).ok(),
                    Cmd::Cancel(end) => cancel(s, *end, flag).ok(),
                    Cmd::Paid => paid(s, ever),
                    Cmd::PastDue => past_due(s),
                };
                if s.is_final() {
                    prop_assert!(next.is_none(), "{:?} left {:?}", c, s);
                }
                if let Some(n) = next {
                    if n.event == "subscription_active" {
                        activations += 1;
                        ever = true;
                    }
                    s = n.status;
                    flag = n.cancel_at_period_end;
                }
                prop_assert!(!flag || matches!(s, Status::Active | Status::Paused));
            }
            prop_assert!(activations <= 1);
        }

        /// The tick and its job agree: the next due moment is the same whatever the time, the
        /// step at it is not `Nothing`, and just before it (or with none) it is.
        #[test]
        fn the_step_is_due_exactly_from_the_next_due_moment(t in any_timing(), now in instant(), other in instant()) {
            let (step, when) = due(&t, now);
            prop_assert_eq!(when, due(&t, other).1);
            prop_assert_eq!(step != Step::Nothing, when.is_some_and(|w| now >= w));
            if let Some(w) = when {
                prop_assert_ne!(due(&t, w).0, Step::Nothing);
                prop_assert_eq!(due(&t, w - Duration::seconds(1)).0, Step::Nothing);
            }
        }

        /// A proration never exceeds the difference of the plans, and its sign is the change's.
        #[test]
        fn prorations_are_bounded(old in 0i64..100_000, new in 0i64..100_000, left in 0i64..=2_592_000) {
            let start = at("2027-01-01T00:00:00Z");
            let end = start + Duration::seconds(2_592_000);
            let p = proration(old, new, start, end, end - Duration::seconds(left));
            prop_assert!(p.abs() <= (new - old).abs() + 1);
            prop_assert!(p == 0 || (p > 0) == (new > old));
        }

        /// Period ends increase strictly and land on the anchor's day when the month has it.
        #[test]
        fn periods_increase(day in 1u32..=31, month in 1u32..=12, count in 1i64..=12, ks in 1i64..40) {
            let Some(anchor) = chrono::NaiveDate::from_ymd_opt(2027, month, day) else { return Ok(()); };
            let anchor = anchor.and_hms_opt(12, 0, 0).unwrap().and_utc();
            let mut last = anchor;
            for k in 1..=ks {
                let end = period_end(anchor, Interval::Month, count, k).unwrap();
                prop_assert!(end > last);
                use chrono::Datelike;
                prop_assert!(end.day() == day || end.day() < day);
                last = end;
            }
        }
    }
}
