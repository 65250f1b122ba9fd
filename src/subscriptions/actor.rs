//! The subscription actor: one per subscription id. It serializes every change of its
//! subscription — pause, resume, cancel, a plan change, and its due moments (renewals,
//! retries, a scheduled cancellation, an expiry) — and commits each under the subscription's
//! version. How a cycle is billed and collected is `cycles.rs`.

use actix::Message;
use chrono::{DateTime, Utc};
use payd_entity::{subscription, subscription_cycle};
use sea_orm::DbErr;

use super::{
    cycles::{
        attempt, bill, moved, new_cycle, next_period, next_seq, open_cycle, proration_lines,
        restarted, retry, save, settle, taxed, void_open, SubscriptionDeps, SubscriptionError,
    },
    machine::{self, Refusal, Status, Step},
    store::{self, CycleWrite},
};
use crate::commit::Db;
use crate::ids::{MandateId, PaymentMethodId};
use crate::stored::Json;
use crate::{
    auth::keys::Scope,
    clock::Timeline,
    commit, payments,
    row_actor::{Row, RowActor},
};

#[derive(Debug, Clone)]
pub enum Command {
    Pause,
    /// A paused one resumes; an active one's scheduled cancellation is undone; an unpaid one's
    /// open cycle is tried again at once. `mandate`: charge under this mandate (and its
    /// method) from now on, checked by the caller.
    Resume {
        mandate: Option<(MandateId, PaymentMethodId)>,
    },
    Cancel {
        at_period_end: bool,
        reason: Option<String>,
    },
    /// A `created` subscription is confirmed with a saved method under a mandate (checked by
    /// the caller) instead of the hosted checkout, whose payment is cancelled.
    Confirm {
        mandate: (MandateId, PaymentMethodId),
    },
    /// A plan change: new items and what a cycle charges, settled for the rest of the period
    /// as `proration` says.
    Update {
        items: Vec<super::api::Item>,
        amount: i64,
        proration: machine::Proration,
    },
    /// Whatever is due now (`machine::due`): a renewal, a retry, a check of a charge in
    /// flight, a scheduled cancellation, an expiry. Sent by the subscription's job.
    Tick,
    /// The charge in flight, made now: sent by the request that recorded it (the first
    /// charge); the job settles it only after its check time, when this never ran.
    Charge,
    /// Read again from the side that bills it: a billing processor's subscription (its status,
    /// plan and quantity applied where they differ), or payd's own charge in flight.
    Sync,
    /// The buyer charged back this processor invoice (`invoice_disputed`).
    InvoiceDisputed {
        invoice_id: crate::ids::ProcessorInvoiceId,
    },
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<subscription::Model, SubscriptionError>")]
pub struct Exec {
    /// Who asks; `None` for payd itself (its jobs).
    pub scope: Option<Scope>,
    pub command: Command,
    /// The timeline it was sent on (see `clock`).
    pub timeline: Timeline,
}

pub type Subscriptions = payd_actors::Registry<RowActor<SubscriptionRow>>;

/// A subscription's actor (one per subscription): how its row is found and how its commands run.
pub struct SubscriptionRow;

impl Row for SubscriptionRow {
    const KIND: &'static str = "subscription";
    type Model = subscription::Model;
    type Deps = SubscriptionDeps;
    type Error = SubscriptionError;
    type Done = subscription::Model;
    type Exec = Exec;
    type Id = crate::ids::SubscriptionId;

    fn db(deps: &SubscriptionDeps) -> &Db {
        &deps.db
    }

    async fn find(
        db: &Db,
        id: &crate::ids::SubscriptionId,
    ) -> Result<Option<subscription::Model>, DbErr> {
        store::find(db, id).await
    }

    fn not_found() -> SubscriptionError {
        SubscriptionError::NotFound
    }

    fn is_not_found(error: &SubscriptionError) -> bool {
        matches!(error, SubscriptionError::NotFound)
    }

    fn owner(m: &subscription::Model) -> (&crate::ids::MerchantId, bool) {
        (&m.merchant_id, m.test_mode)
    }

    fn timeline(msg: &Exec) -> &Timeline {
        &msg.timeline
    }

    async fn exec(
        deps: &SubscriptionDeps,
        current: subscription::Model,
        msg: Exec,
    ) -> (
        subscription::Model,
        Result<subscription::Model, SubscriptionError>,
    ) {
        if let Some(scope) = &msg.scope {
            if !scope.sees(&current.merchant_id, current.test_mode, &current.profile_id) {
                return (current, Err(SubscriptionError::NotFound));
            }
        }
        // Another instance may have changed it: decide again on the stored row.
        commit::decide_fresh(
            current,
            async |s: &subscription::Model| step(deps, s, &msg.command).await,
            |result, s| match result {
                Err(SubscriptionError::LostRace | SubscriptionError::Refused(_)) => true,
                Ok(done) => done.version == s.version,
                Err(_) => false,
            },
            async |s: &subscription::Model| Ok(store::find(&deps.db, &s.id).await?),
            |done: &subscription::Model| done,
            || SubscriptionError::NotFound,
        )
        .await
    }
}

impl commit::Versioned for subscription::Model {
    fn version(&self) -> i64 {
        self.version
    }
}

/// `Command::Sync`: a processor-billed subscription takes the processor's status, plan and
/// quantity where they differ (each status change announced as if made here); a payd-billed
/// one settles a charge in flight.
async fn sync(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    status: Status,
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    if s.billing == store::Biller::Payd {
        return charge_now(deps, s, now).await;
    }
    let found = deps.billing.of(s).await?;
    let Some(p) = found else {
        return Ok(s.clone());
    };
    // As committed: the events below carry the version this change writes.
    let mut after = store::raised(s, s.clone());
    after.updated_at = now;
    let mut events = Vec::new();
    use payd_model::subscriptions::ProcessorStatus as AtProcessor;
    let next = match (p.status, status) {
        (AtProcessor::Cancelled, st) if !st.is_final() => machine::cancel(st, false, false).ok(),
        (AtProcessor::Paused, Status::Active) => {
            machine::pause(status, s.cancel_at_period_end).ok()
        }
        (AtProcessor::Active, Status::Paused) => machine::resume(status, false).ok(),
        _ => None,
    };
    if let Some(next) = next {
        after = moved(&after, next, now);
        if next.status == Status::Cancelled {
            after.cancelled_at = Some(now);
            after.cancellation_reason = Some("cancelled at the billing processor".into());
        }
        events.push(store::event(&after, next.event)?);
    }
    let items = &s.items;
    let plan = super::plans::plan(&p.plan_id);
    let changed = items.first().map(|i| (i.plan_id.as_deref(), i.quantity))
        != Some((Some(p.plan_id.as_str()), p.quantity));
    if let (true, Some(plan)) = (changed, plan) {
        let item = super::api::plan_item(plan, p.quantity);
        after.amount = item.unit_amount * item.quantity;
        after.items = Json(vec![item]);
    }
    if events.is_empty() && after.items == s.items {
        return Ok(s.clone());
    }
    save(deps, s, after, CycleWrite::None, events).await
}

async fn step(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    command: &Command,
) -> Result<subscription::Model, SubscriptionError> {
    let now = deps.clock.now();
    let status = s.status;
    match command {
        Command::Sync => sync(deps, s, status, now).await,
        Command::InvoiceDisputed { invoice_id } => {
            let Some(invoice) = deps.billing.invoice(invoice_id).await? else {
                return Ok(s.clone());
            };
            let cycle = store::cycle_of_invoice(&deps.db, &s.id, invoice_id).await?;
            let mut after = s.clone();
            after.updated_at = now;
            let event = store::disputed_event(s, cycle.as_ref(), &invoice);
            save(deps, s, after, CycleWrite::None, vec![event]).await
        }
        Command::Pause => {
            let next = machine::pause(status, s.cancel_at_period_end)?;
            let after = store::raised(s, moved(s, next, now));
            let events = vec![store::event(&after, next.event)?];
            save(deps, s, after, CycleWrite::None, events).await
        }
        Command::Resume { mandate } => resume(deps, s, status, mandate.as_ref(), now).await,
        Command::Cancel {
            at_period_end,
            reason,
        } => cancel(deps, s, status, *at_period_end, reason.clone(), now).await,
        Command::Confirm { mandate } => confirm(deps, s, status, mandate, now).await,
        Command::Update {
            items,
            amount,
            proration,
        } => update(deps, s, status, items, *amount, *proration, now).await,
        Command::Tick => tick(deps, s, now).await,
        Command::Charge => charge_now(deps, s, now).await,
    }
}

/// Cancels now, or at the period's end; cancelled now, an open cycle not being charged is
/// voided.
async fn cancel(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    status: Status,
    at_period_end: bool,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    let next = machine::cancel(status, at_period_end, s.cancel_at_period_end)?;
    let mut after = store::raised(s, moved(s, next, now));
    after.cancellation_reason = reason;
    let mut cycle = CycleWrite::None;
    if !at_period_end {
        after.cancelled_at = Some(now);
        // An open cycle is not collected any more.
        let open = open_cycle(deps, s).await?.filter(|c| !c.charging);
        if open.is_some() {
            cycle = void_open(&mut after, open, now);
        }
    }
    let events = vec![store::event(&after, next.event)?];
    save(deps, s, after, cycle, events).await
}

/// Confirms a `created` subscription with a mandate: its first cycle is charged under it
/// (unless the hosted checkout's payment settled it).
async fn confirm(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    status: Status,
    mandate: &(MandateId, PaymentMethodId),
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    if status != Status::Created {
        return Err(Refusal::InvalidState {
            status,
            what: "only a created subscription can be confirmed",
        }
        .into());
    }
    let Some(c) = open_cycle(deps, s).await? else {
        return Ok(s.clone());
    };
    // The hosted checkout's payment must never be paid as well.
    if let Some(settled) = withdraw_first_charge(deps, s, &c, now).await? {
        return Ok(settled);
    }
    let mut with = s.clone();
    with.mandate_id = Some(mandate.0.clone());
    with.payment_method_id = Some(mandate.1.clone());
    attempt(deps, s, with, c, None, now).await
}

/// Changes an active subscription's plan, settling the rest of the period as `proration` says.
async fn update(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    status: Status,
    items: &[super::api::Item],
    amount: i64,
    proration: machine::Proration,
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    if status != Status::Active || s.open_cycle_id.is_some() {
        return Err(Refusal::InvalidState {
            status,
            what: "only an active subscription with no cycle being collected changes plan",
        }
        .into());
    }
    // Settled against what the period was paid at, never the plan's list price: an
    // upgrade left unsettled (`none`) earns no credit when it is undone.
    let (owed, paid_rate) = match proration {
        machine::Proration::None => (0, s.paid_rate),
        _ => (
            machine::proration(
                s.paid_rate,
                amount,
                s.current_period_start,
                s.current_period_end,
                now,
            ),
            amount,
        ),
    };
    let mut after = s.clone();
    after.items = Json(items.to_vec());
    after.amount = amount;
    after.paid_rate = paid_rate;
    after.updated_at = now;
    if proration == machine::Proration::AlwaysInvoice && owed > 0 {
        // Charged now: a cycle for the rest of the period, collected like any other.
        let seq = next_seq(deps, s).await?;
        let mut cycle = new_cycle(&after, seq, now)?;
        cycle.period_start = now;
        cycle.lines = proration_lines(owed);
        taxed(deps, &after, &mut cycle, now).await?;
        after.open_cycle_id = Some(cycle.id.clone());
        let after = save(deps, s, after, CycleWrite::Insert(cycle.clone()), vec![]).await?;
        return settle(deps, &after, cycle, now).await;
    }
    after.pending_adjustment = after.pending_adjustment.saturating_add(owed);
    save(deps, s, after, CycleWrite::None, vec![]).await
}

/// Withdraws the first charge of a `created` subscription before it is confirmed another way
/// or expires: a payment still waiting for the buyer (the hosted checkout's) is cancelled, so
/// it can no longer be paid; `None` then, or when there is none. A payment the buyer already
/// paid, or one on its way, is the first cycle's payment: it is settled instead, and that is
/// returned.
async fn withdraw_first_charge(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    c: &subscription_cycle::Model,
    now: DateTime<Utc>,
) -> Result<Option<subscription::Model>, SubscriptionError> {
    let Some(pid) = &c.payment_id else {
        return Ok(None);
    };
    let Some(p) = payments::store::find(&deps.db, pid).await? else {
        return Ok(None);
    };
    use payd_model::payments::Status as Paid;
    match p.status {
        Paid::RequiresPaymentMethod | Paid::RequiresConfirmation => {
            let cancel = payments::actor::run(
                &deps.payments,
                pid,
                None,
                payments::actor::Command::Cancel,
                None,
            )
            .await;
            match cancel {
                Ok(_) => Ok(None),
                Err(e) => {
                    tracing::info!(subscription_id = %s.id, error = %e, "the first charge's payment could not be cancelled");
                    Ok(Some(settle(deps, s, c.clone(), now).await?))
                }
            }
        }
        Paid::Succeeded | Paid::Processing | Paid::RequiresCustomerAction => {
            Ok(Some(settle(deps, s, c.clone(), now).await?))
        }
        Paid::RequiresMerchantAction
        | Paid::RequiresCapture
        | Paid::PartiallyAuthorizedAndRequiresCapture
        | Paid::PartiallyCaptured
        | Paid::PartiallyCapturedAndCapturable
        | Paid::Declined
        | Paid::Failed
        | Paid::Cancelled
        | Paid::CancelledPostCapture
        | Paid::Expired
        | Paid::Conflicted => Ok(None),
    }
}

/// Whatever is due on the subscription now, as [`machine::due`] decides it (the job's time
/// is decided by the same function).
async fn tick(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    let open = open_cycle(deps, s).await?;
    let timing = store::timing(s, open.as_ref(), deps.confirm_within);
    match (machine::due(&timing, now).0, open) {
        (Step::Settle, Some(c)) => settle(deps, s, c, now).await,
        (Step::Retry, Some(c)) => retry(deps, s, c, now).await,
        (Step::Expire, open) => {
            // A first charge the buyer paid (or that is still on its way) is settled, never
            // voided.
            if let Some(c) = open.as_ref().filter(|c| c.charging) {
                if let Some(settled) = withdraw_first_charge(deps, s, c, now).await? {
                    return Ok(settled);
                }
            }
            let mut after = store::raised(s, moved(s, machine::EXPIRED, now));
            let cycle = void_open(&mut after, open, now);
            let events = vec![store::event(&after, machine::EXPIRED.event)?];
            save(deps, s, after, cycle, events).await
        }
        // The period ended with the subscription: an open cycle is not collected any more.
        (Step::End(next), open) => {
            let mut after = moved(s, next, now);
            if next.status == Status::Cancelled {
                after.cancelled_at = Some(s.current_period_end);
            }
            let cycle = void_open(&mut after, open, now);
            let after = store::raised(s, after);
            let events = vec![store::event(&after, next.event)?];
            save(deps, s, after, cycle, events).await
        }
        (step @ (Step::Renew | Step::Pass), _) => {
            let mut after = next_period(s).ok_or(SubscriptionError::PastCalendar)?;
            after.updated_at = now;
            match step {
                Step::Pass => {
                    save(deps, s, store::raised(s, after), CycleWrite::None, vec![]).await
                }
                _ => bill(deps, s, after, None, now).await,
            }
        }
        (Step::Nothing | Step::Settle | Step::Retry, _) => Ok(s.clone()),
    }
}

/// `Command::Charge`: the charge in flight, settled now by the request that recorded it.
async fn charge_now(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    match open_cycle(deps, s).await?.filter(|c| c.charging) {
        Some(c) => settle(deps, s, c, now).await,
        None => Ok(s.clone()),
    }
}

/// `POST …/resume`. A paused subscription becomes active; an active one's cancellation at
/// period end is undone; an unpaid one's open cycle is tried again (under `mandate` if
/// given). A resume charges at most one period, the one that starts with it: the open cycle
/// (moved to that period) if there is one, else a new cycle when the current period was not
/// paid (it began while paused); the subscription's periods count from the resume from then
/// on. Periods spent paused or unpaid are never charged.
async fn resume(
    deps: &SubscriptionDeps,
    s: &subscription::Model,
    status: Status,
    mandate: Option<&(MandateId, PaymentMethodId)>,
    now: DateTime<Utc>,
) -> Result<subscription::Model, SubscriptionError> {
    let open = open_cycle(deps, s).await?;
    if let Some(c) = open.as_ref().filter(|c| c.charging) {
        // A charge already on its way (a resume sent twice): carried on, never made again.
        return settle(deps, s, c.clone(), now).await;
    }
    let mut after = s.clone();
    after.updated_at = now;
    let mut announce = None;
    if status != Status::Unpaid {
        let next = machine::resume(status, s.cancel_at_period_end)?;
        after = moved(&after, next, now);
        announce = Some(next.event);
        // Undoing a scheduled cancellation forgets its reason.
        if s.cancel_at_period_end && status == Status::Active {
            after.cancellation_reason = None;
        }
    }
    if let Some((m, pm)) = mandate {
        after.mandate_id = Some(m.clone());
        after.payment_method_id = Some(pm.clone());
    }
    let owes = match status {
        Status::Unpaid => true,
        Status::Paused => open.is_some() || !store::period_paid(&deps.db, s).await?,
        _ => false,
    };
    if !owes {
        let after = store::raised(s, after);
        let events = announce
            .map(|e| store::event(&after, e))
            .transpose()?
            .into_iter()
            .collect();
        return save(deps, s, after, CycleWrite::None, events).await;
    }
    let mut after = restarted(&after, now).ok_or(SubscriptionError::PastCalendar)?;
    match open {
        Some(mut c) => {
            (c.period_start, c.period_end) = (after.current_period_start, after.current_period_end);
            after.paid_rate = after.amount;
            attempt(deps, s, after, c, announce, now).await
        }
        None => bill(deps, s, after, announce, now).await,
    }
}
