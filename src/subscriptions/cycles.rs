//! A subscription's cycles: billing a period (`bill`: the cycle, its lines taxed by the shop's
//! rules, its first attempt) and collecting it (`attempt`, `settle`: a payment made as payd, or
//! a billing processor's collection), and the commit every change of the actor goes through
//! (`save`: under the subscription's version, with its cycle's write, its events and its one
//! due job). The actor (`actor.rs`) decides which of these a command or a tick runs.
//!
//! Charging a cycle is intent before effect: an attempt is committed first, with the id of the
//! payment it will make; the payment is made with that id; its outcome is committed after. A
//! crash or a lost race in between finds the attempt still `charging` and settles it with the
//! same payment id — made now if it never was, read if it was — so no cycle is charged twice,
//! whatever instance runs next.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use payd_entity::{payment, subscription, subscription_cycle};
use payd_model::subscriptions::CycleStatus;
use sea_orm::DbErr;

use super::{
    api::{CycleLine, CycleTax},
    billing::SandboxBilling,
    machine::{self, Next, Refusal, Status},
    store::{self, CommitError, CycleWrite},
};
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    auth::keys::Scope,
    clock::SharedClock,
    commit::Event,
    conflict::Conflict,
    ids::{new_id, PaymentId},
    money::Money,
    payments::{
        self,
        actor::Payments,
        charge::{Charge, ChargeError, Pay, Settlement},
    },
    wake::Wake,
};

/// What the subscription actors need.
#[derive(Clone)]
pub struct SubscriptionDeps {
    pub db: Db,
    pub clock: SharedClock,
    pub payments: Payments,
    pub wake: Wake,
    /// Where payd is reached (payments in events render their URLs with it).
    pub public_url: String,
    /// Days to wait before each retry of a failed cycle.
    pub retry_days: Vec<u32>,
    /// How long a `created` subscription waits for its first payment.
    pub confirm_within: Duration,
    /// The billing processor that bills adopted subscriptions.
    pub billing: Arc<SandboxBilling>,
    /// `sandbox.max_subscriptions`: a sandbox merchant's subscriptions that have not ended.
    pub sandbox_max: u64,
    /// The shop's tax rules, put on each cycle payd charges when it is made.
    pub tax: Arc<dyn CycleTax>,
}

#[derive(Debug, thiserror::Error)]
pub enum SubscriptionError {
    #[error("no such subscription")]
    NotFound,
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("the subscription was changed concurrently")]
    LostRace,
    /// A condition the change needed no longer held when it was written.
    #[error(transparent)]
    Conflict(Conflict),
    #[error("the subscription's next period is past the calendar's end")]
    PastCalendar,
    #[error("a cycle's amount overflows")]
    Overflow,
    /// A sandbox merchant has this many subscriptions that have not ended, the most it may.
    #[error("at most {0} subscriptions that have not ended (sandbox.max_subscriptions)")]
    SandboxFull(u64),
    /// The cycle's payment was not made: refused (its mandate revoked, its method gone …),
    /// or not a charge payd makes (its amount past the largest charge).
    #[error("the cycle's payment was not made: {0}")]
    Charge(Box<ChargeError>),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

impl From<store::NoRoom> for SubscriptionError {
    fn from(e: store::NoRoom) -> Self {
        match e {
            store::NoRoom::Full(max) => SubscriptionError::SandboxFull(max),
            store::NoRoom::Db(e) => SubscriptionError::Db(e),
        }
    }
}

impl From<CommitError> for SubscriptionError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::LostRace => SubscriptionError::LostRace,
            CommitError::Refused(c) => SubscriptionError::Conflict(c),
            CommitError::Db(e) => SubscriptionError::Db(e),
        }
    }
}

/// `s` moved by a transition: a new status or cancellation flag, and a new transition id.
pub(super) fn moved(
    s: &subscription::Model,
    next: Next,
    now: DateTime<Utc>,
) -> subscription::Model {
    let mut after = s.clone();
    after.status = next.status;
    after.cancel_at_period_end = next.cancel_at_period_end;
    after.transition_id = new_id("tr");
    after.updated_at = now;
    after
}

/// The subscription's open cycle, if any.
pub(super) async fn open_cycle(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
) -> Result<Option<subscription_cycle::Model>, SubscriptionError> {
    Ok(store::open_cycle(&deps.db, s).await?)
}

/// A status change of a processor-billed subscription made in payd is made at the processor
/// too, before it is committed here (the processor's change is idempotent; if the commit then
/// fails, a sync brings payd to what the processor holds).
pub(super) async fn forward_status(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    now: DateTime<Utc>,
) -> Result<(), SubscriptionError> {
    use payd_model::subscriptions::ProcessorStatus as AtProcessor;
    let at_processor = match s.status {
        Status::Active => AtProcessor::Active,
        Status::Paused => AtProcessor::Paused,
        Status::Cancelled | Status::InActive => AtProcessor::Cancelled,
        // No processor status follows these: the processor's dunning makes `unpaid`.
        Status::Created | Status::Unpaid => return Ok(()),
    };
    let found = deps.billing.of(s).await?;
    if let Some(p) = found.filter(|p| p.status != at_processor) {
        let change = super::billing::ProcessorChange {
            status: Some(at_processor),
            ..Default::default()
        };
        deps.billing.change(&p, &change, now).await?;
    }
    Ok(())
}

/// Commits `after` over `before` with the cycle's write and the events; wakes the webhook
/// dispatcher when they queued deliveries. The events must be rendered from `after` as
/// [`store::raised`] makes it (its version one up), which is what is committed.
pub(super) async fn save(
    deps: &SubscriptionDeps,
    before: &subscription::Model,
    after: subscription::Model,
    cycle: CycleWrite,
    events: Vec<Event>,
) -> Result<subscription::Model, SubscriptionError> {
    let after = store::raised(before, after);
    if after.billing != store::Biller::Payd && after.status != before.status {
        forward_status(deps, &after, after.updated_at).await?;
    }
    let open = match &cycle {
        CycleWrite::Insert(c) | CycleWrite::Update(c) if c.status == CycleStatus::Open => {
            Some(c.clone())
        }
        CycleWrite::Insert(_) | CycleWrite::Update(_) => None,
        CycleWrite::None => open_cycle(deps, &after).await?,
    };
    let due = store::next_due(&after, open.as_ref(), deps.confirm_within);
    let deliveries = store::commit(&deps.db, before, &after, cycle, events, due).await?;
    if deliveries > 0 {
        deps.wake.now();
    }
    Ok(after)
}

/// The sequence number of the subscription's next cycle.
pub(super) async fn next_seq(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
) -> Result<i64, SubscriptionError> {
    Ok(store::cycles(&deps.db, &s.id)
        .await?
        .first()
        .map_or(1, |c| c.seq + 1))
}

/// A cycle's lines.
pub(super) fn lines_of(c: &subscription_cycle::Model) -> Vec<CycleLine> {
    c.lines.0.clone()
}

/// The one line of a cycle whose plan is charged less a credit of plan changes.
pub(super) fn credited_line(charge: i64) -> Json<Vec<CycleLine>> {
    let line = one_line(
        "period",
        "The plan, less the credit of plan changes",
        charge.max(0),
    );
    Json(vec![line])
}

/// A line of one unit of `amount`, untaxed.
fn one_line(line_id: &str, name: &str, amount: i64) -> CycleLine {
    CycleLine {
        line_id: line_id.to_owned(),
        name: name.to_owned(),
        quantity: 1,
        unit_amount: amount,
        product_id: None,
        price_id: None,
        tax_rule_id: None,
        tax_rate_bps: 0,
        tax_inclusive: false,
        tax_amount: 0,
    }
}

/// Puts the shop's tax rules on `cycle`'s lines (as they stand at `now`, for the customer),
/// and makes its amount what they charge: the amount a cycle charges is what its invoice
/// totals. A billing processor's cycle is taxed by the processor.
pub(super) async fn taxed(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    cycle: &mut subscription_cycle::Model,
    now: DateTime<Utc>,
) -> Result<(), SubscriptionError> {
    let mut lines = lines_of(cycle);
    if s.billing != store::Biller::Payd || lines.is_empty() {
        return Ok(());
    }
    let taxes = deps.tax.tax(s, &lines, now).await?;
    for (line, tax) in lines.iter_mut().zip(taxes) {
        line.tax_rule_id = tax.rule_id;
        line.tax_rate_bps = tax.rate_bps;
        line.tax_inclusive = tax.inclusive;
        line.tax_amount = tax.amount;
    }
    let total = lines
        .iter()
        .try_fold(0i64, |sum, l| sum.checked_add(l.total()?))
        .ok_or(SubscriptionError::Overflow)?;
    cycle.amount = total;
    cycle.lines = Json(lines);
    Ok(())
}

/// The line of a cycle that charges prorations.
fn proration_line(amount: i64) -> CycleLine {
    one_line(
        super::api::PRORATION_LINE,
        "Prorations of plan changes",
        amount,
    )
}

/// The lines of a cycle that charges only prorations.
pub(super) fn proration_lines(amount: i64) -> Json<Vec<CycleLine>> {
    Json(vec![proration_line(amount)])
}

/// The renewal, or the period a resume starts: `after` (`s` in its new period) gets the
/// period's cycle, with its first attempt recorded before it is charged, and `announce` (a
/// transition made with it) is announced in the same commit. Prorations of plan changes are
/// added to the cycle (a credit is taken off it; one larger than the cycle pays it whole and
/// carries the rest).
pub(super) async fn bill(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    mut after: subscription::Model,
    announce: Option<&'static str>,
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    let seq = next_seq(deps, s).await?;
    let mut cycle = new_cycle(&after, seq, now)?;
    after.paid_rate = after.amount;
    let charge = after.amount.saturating_add(after.pending_adjustment);
    if after.pending_adjustment > 0 {
        cycle.lines.push(proration_line(after.pending_adjustment));
    } else if after.pending_adjustment < 0 {
        // Lines cannot be negative: a credited cycle charges the plan less the credit as one
        // line (taxed as such).
        cycle.lines = credited_line(charge);
    }
    if charge <= 0 {
        cycle.amount = 0;
        cycle.status = CycleStatus::Paid;
        cycle.charging = false;
        cycle.attempts = 0;
        cycle.payment_id = None;
        after.pending_adjustment = charge;
        let after = store::raised(s, after);
        let mut events: Vec<Event> = announce
            .map(|e| store::event(&after, e))
            .transpose()?
            .into_iter()
            .collect();
        events.push(store::invoice_event(&after, &cycle, None, "invoice_paid")?);
        return save(deps, s, after, CycleWrite::Insert(cycle), events).await;
    }
    cycle.amount = charge;
    taxed(deps, &after, &mut cycle, now).await?;
    after.pending_adjustment = 0;
    after.open_cycle_id = Some(cycle.id.clone());
    let after = store::raised(s, after);
    let events = announce
        .map(|e| store::event(&after, e))
        .transpose()?
        .into_iter()
        .collect();
    let after = save(deps, s, after, CycleWrite::Insert(cycle.clone()), events).await?;
    settle(deps, &after, cycle, now).await
}

/// `after`'s open cycle, if any, voided: a subscription that ends does not collect it.
pub(super) fn void_open(
    after: &mut subscription::Model,
    open: Option<subscription_cycle::Model>,
    now: DateTime<Utc>,
) -> CycleWrite {
    after.open_cycle_id = None;
    match open {
        Some(mut c) => {
            c.status = CycleStatus::Void;
            c.next_attempt_at = None;
            c.updated_at = now;
            CycleWrite::Update(c)
        }
        None => CycleWrite::None,
    }
}

/// A failed cycle's retry, due now. One made after the cycle's period ended pays a period
/// that starts now (the subscription starts it: the time the cycle went unpaid is not
/// charged), so a late payment never makes the periods since owed at once.
pub(super) async fn retry(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    mut c: subscription_cycle::Model,
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    let mut after = s.clone();
    if now >= c.period_end {
        after = restarted(s, now).ok_or(SubscriptionError::PastCalendar)?;
        (c.period_start, c.period_end) = (after.current_period_start, after.current_period_end);
    }
    attempt(deps, s, after, c, None, now).await
}

/// `s` in its next period; `None` past the calendar's end.
pub fn next_period(s: &subscription::Model) -> Option<subscription::Model> {
    let k = s.period_index + 1;
    let end = machine::period_end(
        s.anchor_at,
        s.interval,
        s.interval_count,
        k - s.anchor_index,
    )?;
    let mut after = s.clone();
    after.period_index = k;
    after.current_period_start = s.current_period_end;
    after.current_period_end = end;
    Some(after)
}

/// `s` in a new period that starts `now`, its periods counted from there on (a resume, or a
/// retry after its cycle's period ended); `None` past the calendar's end.
pub fn restarted(s: &subscription::Model, now: DateTime<Utc>) -> Option<subscription::Model> {
    let mut after = s.clone();
    after.period_index = s.period_index + 1;
    after.anchor_index = s.period_index;
    after.anchor_at = now;
    after.current_period_start = now;
    after.current_period_end = machine::period_end(now, s.interval, s.interval_count, 1)?;
    Some(after)
}

/// A cycle for `s`'s current period, with its first attempt recorded (`charging`).
pub fn new_cycle(
    s: &subscription::Model,
    seq: i64,
    now: DateTime<Utc>,
) -> Result<subscription_cycle::Model, DbErr> {
    let items = &s.items.0;
    // Each line names its product and price, so the sales report counts what cycles sold.
    let lines: Vec<CycleLine> = items
        .iter()
        .enumerate()
        .map(|(i, it)| CycleLine {
            line_id: format!("item_{}", i + 1),
            name: it
                .price_id
                .clone()
                .or_else(|| it.plan_id.clone())
                .unwrap_or_default(),
            quantity: it.quantity,
            unit_amount: it.unit_amount,
            product_id: it.product_id.clone(),
            price_id: it.price_id.clone(),
            tax_rule_id: None,
            tax_rate_bps: 0,
            tax_inclusive: false,
            tax_amount: 0,
        })
        .collect();
    Ok(subscription_cycle::Model {
        id: new_id("cyc"),
        subscription_id: s.id.clone(),
        seq,
        period_start: s.current_period_start,
        period_end: s.current_period_end,
        amount: s.amount,
        currency: s.currency.clone(),
        lines: Json(lines),
        status: CycleStatus::Open,
        attempts: 1,
        charging: true,
        payment_id: (s.billing == store::Biller::Payd).then(PaymentId::new),
        processor_invoice_id: None,
        next_attempt_at: None,
        created_at: now,
        updated_at: now,
    })
}

/// A new attempt at an open cycle (`after`: the subscription it is made for, with
/// `announce`, a transition made with it): recorded, then made.
pub(super) async fn attempt(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    mut after: subscription::Model,
    mut c: subscription_cycle::Model,
    announce: Option<&'static str>,
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    c.attempts += 1;
    c.charging = true;
    c.payment_id = (s.billing == store::Biller::Payd).then(PaymentId::new);
    c.next_attempt_at = None;
    c.updated_at = now;
    after.updated_at = now;
    after.open_cycle_id = Some(c.id.clone());
    let after = store::raised(s, after);
    let events = announce
        .map(|e| store::event(&after, e))
        .transpose()?
        .into_iter()
        .collect();
    let after = save(deps, s, after, CycleWrite::Update(c.clone()), events).await?;
    settle(deps, &after, c, now).await
}

/// How an attempt ended.
pub(super) enum Outcome {
    /// Paid: by this payment, or (`None`) collected by the billing processor.
    Paid(Option<payment::Model>),
    Failed(Option<payment::Model>),
    /// The payment is still on its way (`processing`): checked again later.
    Pending,
}

/// Makes (or reads) the attempt's payment and commits its outcome.
pub(super) async fn settle(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    mut c: subscription_cycle::Model,
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    let status = s.status;
    let outcome = match s.billing {
        store::Biller::Payd => charge(deps, s, &c).await?,
        store::Biller::BillingSandbox => collect(deps, s, &mut c, now).await?,
    };
    // As committed: the events below carry the version this change writes.
    let mut after = store::raised(s, s.clone());
    after.updated_at = now;
    let json = |p: Option<&payment::Model>| -> Result<Option<serde_json::Value>, DbErr> {
        let Some(p) = p else { return Ok(None) };
        let shown = payments::api::Payment::render(p, &deps.public_url)?;
        Ok(serde_json::to_value(shown).ok())
    };
    let mut events = Vec::new();
    match outcome {
        Outcome::Pending => {
            c.next_attempt_at = Some(now + machine::charge_check(status, now - c.created_at));
            c.updated_at = now;
            return save(deps, s, after, CycleWrite::Update(c), events).await;
        }
        Outcome::Paid(p) => {
            c.status = CycleStatus::Paid;
            c.charging = false;
            c.next_attempt_at = None;
            c.updated_at = now;
            after.open_cycle_id = None;
            // Paid on the hosted checkout: the card it saved, under its mandate, is charged
            // from now on.
            if after.mandate_id.is_none() && after.billing == store::Biller::Payd {
                if let Some(m) = p.as_ref().and_then(|p| p.mandate_id.as_ref()) {
                    if let Some(found) = crate::customers::store::find_mandate(&deps.db, m).await? {
                        after.payment_method_id = Some(found.payment_method_id);
                    }
                    after.mandate_id = Some(m.clone());
                }
                after.checkout_url = None;
            }
            if let Some(next) = machine::paid(status, s.ever_active) {
                after = moved(&after, next, now);
                after.ever_active = true;
                events.push(store::event(&after, next.event)?);
            }
            events.push(store::invoice_event(
                &after,
                &c,
                json(p.as_ref())?,
                "invoice_paid",
            )?);
        }
        Outcome::Failed(p) => {
            c.charging = false;
            c.updated_at = now;
            // Refused before a payment was made (a mandate revoked, a method gone): the cycle
            // names no payment that does not exist.
            if p.is_none() {
                c.payment_id = None;
            }
            c.next_attempt_at = match status {
                // The first charge of a subscription is not retried: it waits, then expires.
                Status::Created => None,
                _ => machine::retry_after(c.attempts, &deps.retry_days).map(|d| now + d),
            };
            // Both events show the subscription as this change commits it (one version, one
            // state): after retries ran out, already `unpaid`.
            let past_due = machine::past_due(status).filter(|_| c.next_attempt_at.is_none());
            if let Some(next) = past_due {
                after = moved(&after, next, now);
            }
            events.push(store::invoice_event(
                &after,
                &c,
                json(p.as_ref())?,
                "invoice_payment_failed",
            )?);
            if let Some(next) = past_due {
                events.push(store::event(&after, next.event)?);
            }
        }
    }
    save(deps, s, after, CycleWrite::Update(c), events).await
}

/// The attempt's payment, made with the recorded id — or, if it was made already (by this
/// instance before a crash, or by another), carried on: confirmed if it still waits for
/// that, else read as it stands. Never a second payment.
pub(super) async fn charge(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    c: &subscription_cycle::Model,
) -> Result<Outcome, SubscriptionError> {
    let Some(pid) = &c.payment_id else {
        return Ok(Outcome::Failed(None));
    };
    // Without a mandate (a first cycle the buyer pays on the checkout) nothing is charged
    // off-session: the payment made for the buyer is the answer.
    let made = match off_session(s) {
        Some(pay) => payments::charge::charge(&deps.payments, cycle_charge(s, c, pay)?)
            .await
            .map_err(|e| e.to_string()),
        None => Err("the subscription has no mandate to charge off-session".to_owned()),
    };
    let settled = match made {
        Ok(settled) => settled,
        // Refused (a mandate revoked, a method gone: a failed attempt, like a decline), or
        // settled meanwhile by another instance (then its state is the answer).
        Err(e) => match payments::charge::find(&deps.payments, pid).await? {
            Some(settled) => settled,
            None => {
                tracing::info!(subscription_id = %s.id, cycle_id = %c.id, error = %e, "a subscription charge was refused");
                return Ok(Outcome::Failed(None));
            }
        },
    };
    Ok(match settled {
        Settlement::Paid(p) => Outcome::Paid(Some(p)),
        Settlement::Unpaid(p) => Outcome::Failed(Some(p)),
        // On its way (processing, confirming elsewhere, waiting for the buyer, or for a sync
        // to settle it): looked at again later.
        Settlement::Pending(_) => Outcome::Pending,
    })
}

/// The attempt collected by the billing processor, under the attempt's key (the processor
/// makes one invoice per key, so an attempt retried after a crash is not collected twice).
/// A subscription whose processor record is gone fails the attempt.
pub(super) async fn collect(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    c: &mut subscription_cycle::Model,
    now: DateTime<Utc>,
) -> Result<Outcome, SubscriptionError> {
    let found = deps.billing.of(s).await?;
    let Some(at_processor) = found else {
        return Ok(Outcome::Failed(None));
    };
    let key = format!("{}:{}", c.id, c.attempts);
    let invoice = deps
        .billing
        .collect(
            &at_processor,
            &key,
            c.amount,
            &c.currency,
            (c.period_start, c.period_end),
            now,
        )
        .await?;
    c.processor_invoice_id = Some(invoice.id);
    use payd_model::subscriptions::ProcessorInvoiceStatus as Collected;
    Ok(match invoice.status {
        Collected::Paid => Outcome::Paid(None),
        Collected::Failed => Outcome::Failed(None),
    })
}

/// How a subscription's cycles are charged without the buyer: under its mandate, with its
/// method; `None` when it has no mandate.
pub fn off_session(s: &subscription::Model) -> Option<Pay> {
    Some(Pay::OffSession {
        mandate_id: s.mandate_id.clone()?,
        payment_method_id: s.payment_method_id.clone(),
    })
}

/// The charge of a cycle's attempt, made in the subscription's shop as payd itself: `pay`
/// off-session under the subscription's mandate, or, for the first cycle, on the hosted
/// checkout, saving the card for later.
pub fn cycle_charge(
    s: &subscription::Model,
    c: &subscription_cycle::Model,
    pay: Pay,
) -> Result<Charge, DbErr> {
    let payment_id = c.payment_id.clone().ok_or_else(|| {
        DbErr::Custom(format!(
            "cycle {} of a subscription payd bills has no payment id",
            c.id
        ))
    })?;
    Ok(Charge {
        payment_id,
        scope: Scope::whole(&s.merchant_id, s.test_mode),
        shop: s.profile_id.clone(),
        customer_id: s.customer_id.clone(),
        pay,
        amount: Money::new(c.amount, &c.currency),
        lines: c.lines.iter().map(CycleLine::payment_line).collect(),
        metadata: [
            ("subscription_id".to_owned(), s.id.to_string().into()),
            ("cycle_id".to_owned(), c.id.clone().into()),
        ]
        .into_iter()
        .collect(),
        description: format!("Subscription {} cycle {}", s.id, c.seq),
    })
}
