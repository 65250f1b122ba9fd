//! Persistence of subscriptions and their cycles. A subscription's change, its cycle's write,
//! its events and its one due job commit in one transaction under the subscription's version.

use chrono::{DateTime, Duration, Utc};
use payd_entity::{billing_invoice, subscription, subscription_cycle};
use payd_model::subscriptions::CycleStatus;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryOrder, QueryTrait,
};

use super::{
    api::{Cycle, InvoiceDisputed, InvoicePaid, ListSubscriptionsQuery, Subscription},
    machine::{self, Status},
};
use crate::commit::Db;
use crate::{
    commit::{self, Change, Event, Job, Write},
    pagination::{paginate, List, Page, PageError},
};

pub use crate::commit::CommitError;

/// Scheduled job: the subscription's next due moment (a renewal, a retry, a check of a charge
/// in flight, a scheduled cancellation, the expiry of an unconfirmed one).
pub const TICK_JOB: &str = "subscription_tick";

/// Scheduled job: a cycle was paid; its invoice, if one stands open, is paid with it (the
/// invoices register the handler: subscriptions never import invoices).
pub const CYCLE_PAID_JOB: &str = "subscription_cycle_paid";

/// Who bills a subscription: `Biller::Payd`, or the billing processor that collects it.
pub use payd_model::subscriptions::Biller;

/// A subscription event with the subscription's object.
pub fn event(s: &subscription::Model, event_type: &str) -> Result<Event, DbErr> {
    let object = serde_json::to_string(&Subscription::render(s)?).unwrap_or_default();
    Ok(with_object(s, event_type, object))
}

/// An event about the subscription whose object is `object`.
fn with_object(s: &subscription::Model, event_type: &str, object: String) -> Event {
    Event {
        merchant_id: s.merchant_id.clone(),
        profile_id: Some(s.profile_id.clone()),
        test_mode: s.test_mode,
        event_type: event_type.to_owned(),
        object_id: s.id.to_string(),
        content_type: "subscription_details",
        object,
    }
}

/// `invoice_paid` or `invoice_payment_failed`: the subscription with the cycle in `invoice`
/// and the attempt's payment.
pub fn invoice_event(
    s: &subscription::Model,
    c: &subscription_cycle::Model,
    payment: Option<serde_json::Value>,
    event_type: &str,
) -> Result<Event, DbErr> {
    let object = InvoicePaid {
        subscription: Subscription::render(s)?,
        invoice: Cycle::render(c, s.test_mode)?,
        payment,
    };
    let object = serde_json::to_string(&object).unwrap_or_default();
    Ok(with_object(s, event_type, object))
}

/// The subscription that adopted this processor subscription, if one has.
pub async fn by_processor_subscription(
    db: &impl ConnectionTrait,
    processor_subscription_id: &str,
) -> Result<Option<subscription::Model>, DbErr> {
    subscription::Entity::find()
        .filter(subscription::Column::ProcessorSubscriptionId.eq(processor_subscription_id))
        .one(db)
        .await
}

/// The cycle a processor invoice collected, if it is this subscription's.
pub async fn cycle_of_invoice(
    db: &impl ConnectionTrait,
    subscription_id: &str,
    invoice_id: &str,
) -> Result<Option<subscription_cycle::Model>, DbErr> {
    subscription_cycle::Entity::find()
        .filter(subscription_cycle::Column::SubscriptionId.eq(subscription_id))
        .filter(subscription_cycle::Column::ProcessorInvoiceId.eq(invoice_id))
        .one(db)
        .await
}

/// `invoice_disputed`: a cycle the billing processor collected was charged back. Its object
/// has the spec's fields and the processor's identifiers.
pub fn disputed_event(
    s: &subscription::Model,
    cycle: Option<&subscription_cycle::Model>,
    invoice: &billing_invoice::Model,
) -> Event {
    let object = InvoiceDisputed {
        dispute_id: invoice.dispute_id.clone().unwrap_or_default(),
        subscription_id: s.id.to_string(),
        invoice_id: cycle.map(|c| c.id.clone()),
        amount: invoice.amount,
        currency: invoice.currency.clone(),
        dispute_status: "needs_response".into(),
        test_mode: s.test_mode,
        processor: s.billing.to_string(),
        processor_subscription_id: s
            .processor_subscription_id
            .as_ref()
            .map(ToString::to_string),
        processor_invoice_id: invoice.id.to_string(),
    };
    let object = serde_json::to_string(&object).unwrap_or_default();
    with_object(s, "invoice_disputed", object)
}

/// What decides the subscription's due moments: its row and its open cycle.
pub fn timing(
    s: &subscription::Model,
    open: Option<&subscription_cycle::Model>,
    confirm_within: Duration,
) -> machine::Timing {
    machine::Timing {
        status: s.status,
        confirm_by: s.created_at + confirm_within,
        period_end: s.current_period_end,
        cancel_at_period_end: s.cancel_at_period_end,
        period: s.period_index,
        term_cycles: s.term_cycles,
        open: open.map(|c| machine::OpenCycle {
            charging: c.charging,
            next_attempt_at: c.next_attempt_at,
            updated_at: c.updated_at,
        }),
    }
}

/// When the subscription is next due (its job's time), as [`machine::due`] decides it (the
/// moment is the same at any time; the row's own serves).
pub fn next_due(
    s: &subscription::Model,
    open: Option<&subscription_cycle::Model>,
    confirm_within: Duration,
) -> Option<DateTime<Utc>> {
    machine::due(&timing(s, open, confirm_within), s.updated_at).1
}

/// When the subscription is next due, as stored (its job's time).
pub async fn due_of(
    db: &impl ConnectionTrait,
    s: &subscription::Model,
    confirm_within: Duration,
) -> Result<Option<DateTime<Utc>>, DbErr> {
    Ok(next_due(
        s,
        open_cycle(db, s).await?.as_ref(),
        confirm_within,
    ))
}

/// The cycle a subscription is collecting, if any.
pub async fn open_cycle(
    db: &impl ConnectionTrait,
    s: &subscription::Model,
) -> Result<Option<subscription_cycle::Model>, DbErr> {
    match &s.open_cycle_id {
        Some(id) => find_cycle(db, id).await,
        None => Ok(None),
    }
}

/// Whether the subscription's current period is paid: a paid cycle covers it (a period that
/// began while the subscription was paused is not).
pub async fn period_paid(
    db: &impl ConnectionTrait,
    s: &subscription::Model,
) -> Result<bool, DbErr> {
    Ok(subscription_cycle::Entity::find()
        .filter(subscription_cycle::Column::SubscriptionId.eq(s.id.as_str()))
        .filter(subscription_cycle::Column::Status.eq(CycleStatus::Paid))
        .filter(subscription_cycle::Column::PeriodEnd.gte(s.current_period_end))
        .one(db)
        .await?
        .is_some())
}

/// A sandbox merchant's clock renews every subscription it has: it may have at most
/// `sandbox.max_subscriptions` that have not ended (`NoRoom::Full`: 409 `limit_reached` naming
/// the setting). Live merchants are not bounded here. Checked before the subscription is made.
pub async fn check_sandbox_room(
    db: &impl ConnectionTrait,
    caller: &crate::auth::keys::Caller,
    max: u64,
) -> Result<(), NoRoom> {
    if !caller.test_mode() {
        return Ok(());
    }
    if count_live(db, caller.merchant_id.as_str(), true).await? >= max {
        return Err(NoRoom::Full(max));
    }
    Ok(())
}

/// Why [`check_sandbox_room`] refused.
#[derive(Debug, thiserror::Error)]
pub enum NoRoom {
    #[error("at most {0} subscriptions that have not ended (sandbox.max_subscriptions)")]
    Full(u64),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

/// How many subscriptions the merchant has in this mode that have not ended.
pub async fn count_live(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
) -> Result<u64, DbErr> {
    use sea_orm::PaginatorTrait;
    let ended = Status::ALL
        .into_iter()
        .filter(|s| s.is_final())
        .map(Status::as_str);
    subscription::Entity::find()
        .filter(subscription::Column::MerchantId.eq(merchant_id))
        .filter(subscription::Column::TestMode.eq(test_mode))
        .filter(subscription::Column::Status.is_not_in(ended))
        .count(db)
        .await
}

/// How many renewals the merchant's active subscriptions in this mode make from now until
/// `until` (on the merchant's clock), counted up to `cap + 1`: what an advance of its test
/// clock to `until` would charge.
pub async fn renewals_until(
    db: &impl ConnectionTrait,
    merchant_id: &crate::ids::MerchantId,
    until: DateTime<Utc>,
    cap: u64,
) -> Result<u64, DbErr> {
    let active = subscription::Entity::find()
        .filter(subscription::Column::MerchantId.eq(merchant_id.as_str()))
        .filter(subscription::Column::TestMode.eq(true))
        .filter(subscription::Column::Status.eq(Status::Active))
        .filter(subscription::Column::CurrentPeriodEnd.lte(until))
        .all(db)
        .await?;
    let mut n = 0;
    for s in active {
        let (mut k, mut end) = (s.period_index, Some(s.current_period_end));
        // Bounded: each turn counts one renewal, and the count stops past the cap.
        while let Some(e) = end.filter(|e| *e <= until && n <= cap) {
            n += 1;
            k += 1;
            end = super::machine::period_end(
                s.anchor_at,
                s.interval,
                s.interval_count,
                k - s.anchor_index,
            )
            .filter(|next| *next > e);
        }
    }
    Ok(n)
}

/// What a change does to a cycle.
pub enum CycleWrite {
    None,
    Insert(subscription_cycle::Model),
    Update(subscription_cycle::Model),
}

fn job(s: &subscription::Model, at: Option<DateTime<Utc>>) -> Job {
    match at {
        Some(at) => Job::Schedule {
            kind: TICK_JOB,
            entity_id: s.id.to_string(),
            at,
        },
        None => Job::Cancel {
            kinds: vec![TICK_JOB],
            entity_id: s.id.to_string(),
        },
    }
}

/// A new subscription with its first cycle (none for an adopted one), its events and its job.
pub async fn insert(
    db: &Db,
    s: &subscription::Model,
    cycle: Option<&subscription_cycle::Model>,
    events: Vec<Event>,
    due: Option<DateTime<Utc>>,
) -> Result<(), CommitError> {
    let mut change = Change::at(s.created_at).write(commit::insert(s.clone()));
    if let Some(c) = cycle {
        change = change.write(commit::insert(c.clone()));
    }
    for e in events {
        change = change.event(e);
    }
    commit::commit(db, change.job(job(s, due))).await?;
    Ok(())
}

/// The subscription as a change over `before` writes it: its version one up. A change's
/// events are rendered from it, so that their object carries the version the change commits.
pub fn raised(before: &subscription::Model, mut after: subscription::Model) -> subscription::Model {
    after.version = before.version + 1;
    after
}

/// Replaces the subscription if nobody wrote since `before`, with its cycle's write, its
/// events and its job (`after`: [`raised`] over `before`). Returns the webhook deliveries
/// queued.
pub async fn commit(
    db: &Db,
    before: &subscription::Model,
    after: &subscription::Model,
    cycle: CycleWrite,
    events: Vec<Event>,
    due: Option<DateTime<Utc>>,
) -> Result<usize, CommitError> {
    let mut change = Change::at(after.updated_at).write(Write::Cas(
        subscription::Entity::update_many()
            .set(after.clone().into_active_model().reset_all())
            .filter(subscription::Column::Id.eq(before.id.as_str()))
            .filter(subscription::Column::Version.eq(before.version))
            .into_query(),
    ));
    let paid = match &cycle {
        CycleWrite::Insert(c) | CycleWrite::Update(c) if c.status == CycleStatus::Paid => {
            Some(c.id.clone())
        }
        _ => None,
    };
    if let Some(cycle_id) = paid {
        change = change.job(Job::Schedule {
            kind: CYCLE_PAID_JOB,
            entity_id: cycle_id,
            at: after.updated_at,
        });
    }
    change = match cycle {
        CycleWrite::None => change,
        CycleWrite::Insert(c) => change.write(commit::insert(c)),
        CycleWrite::Update(c) => change.write(Write::Update(
            subscription_cycle::Entity::update_many()
                .filter(subscription_cycle::Column::Id.eq(c.id.as_str()))
                .set(c.into_active_model().reset_all())
                .into_query(),
        )),
    };
    for e in events {
        change = change.event(e);
    }
    Ok(commit::commit(db, change.job(job(after, due)))
        .await?
        .deliveries)
}

pub async fn find(
    db: &impl ConnectionTrait,
    id: &crate::ids::SubscriptionId,
) -> Result<Option<subscription::Model>, DbErr> {
    subscription::Entity::find_by_id(id.clone()).one(db).await
}

pub async fn find_cycle(
    db: &impl ConnectionTrait,
    id: &str,
) -> Result<Option<subscription_cycle::Model>, DbErr> {
    subscription_cycle::Entity::find_by_id(id).one(db).await
}

/// A subscription's cycles, newest first.
pub async fn cycles(
    db: &impl ConnectionTrait,
    subscription_id: &str,
) -> Result<Vec<subscription_cycle::Model>, DbErr> {
    subscription_cycle::Entity::find()
        .filter(subscription_cycle::Column::SubscriptionId.eq(subscription_id))
        .order_by_desc(subscription_cycle::Column::Seq)
        .all(db)
        .await
}

pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: Option<&str>,
    f: &ListSubscriptionsQuery,
    page: &Page,
) -> Result<List<subscription::Model>, PageError> {
    let mut q = subscription::Entity::find()
        .filter(subscription::Column::MerchantId.eq(merchant_id))
        .filter(subscription::Column::TestMode.eq(test_mode));
    if let Some(p) = profile_id {
        q = q.filter(subscription::Column::ProfileId.eq(p));
    }
    let visible = q.clone();
    if let Some(c) = &f.customer_id {
        q = q.filter(subscription::Column::CustomerId.eq(c.as_str()));
    }
    if let Some(s) = &f.status {
        q = q.filter(subscription::Column::Status.eq(s.as_str()));
    }
    paginate(db, visible, q, subscription::Column::Id, page).await
}
