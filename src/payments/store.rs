//! Persistence of payments: the row, its attempts and history, its scheduled jobs, written
//! together in one transaction guarded by the row's `version`.

use chrono::{DateTime, Duration, Utc};
use payd_entity::{
    payment, payment_attempt, payment_status_history, processor_account, refund, routing_config,
};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr,
    EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, TransactionTrait,
};

use super::{
    api::ListPaymentsRequest,
    machine::{CaptureMethod, State, Status},
    routing::RoutingRules,
};
use crate::{
    customers, disputes,
    events::outbox::{self, NewEvent},
    ids::new_id,
    pagination::{paginate, List, Page},
    scheduler,
};

/// Scheduled job: expire an unconfirmed payment or a lapsed authorization.
pub const EXPIRY_JOB: &str = "payment_expiry";
/// Scheduled job: ask the processor about a pending payment.
pub const SETTLE_JOB: &str = "payment_settle";
/// Scheduled job: ask the processor about a pending refund (the entity is the refund).
pub const REFUND_SETTLE_JOB: &str = "refund_settle";
/// Scheduled job: the buyer of a captured sandbox payment (card …0259) disputes it.
pub const DISPUTE_OPEN_JOB: &str = "dispute_open";

/// An event a transition announces.
pub struct Announcement {
    pub event_type: &'static str,
    /// `payment_details`, `refund_details`.
    pub content_type: &'static str,
    pub object_id: String,
    /// The object's JSON as the API renders it.
    pub object: String,
}

/// A card to save for the payment's customer, and the mandate to create with it.
pub struct SaveCard {
    pub customer_id: String,
    pub card: crate::processors::StoredCard,
    /// The mandate's terms and its (already chosen) id.
    pub mandate: Option<(super::api::MandateRequest, String)>,
}

/// What a transition writes besides the payment row.
#[derive(Default)]
pub struct Changes {
    pub trigger: &'static str,
    pub attempts: Vec<payment_attempt::Model>,
    pub save: Option<SaveCard>,
    /// A single-use mandate this transition's charge used up.
    pub spend_mandate: Option<payd_entity::mandate::Model>,
    /// A refund this transition created (version 0) or changed.
    pub refund: Option<refund::Model>,
    /// A dispute this transition opened (announced and given its deadline by the dispute store).
    pub dispute: Option<payd_entity::dispute::Model>,
    /// When the processor will open a dispute on what this transition captured.
    pub dispute_due: Option<DateTime<Utc>>,
    pub events: Vec<Announcement>,
}

/// The machine's view of a stored payment.
pub fn state_of(m: &payment::Model) -> State {
    State {
        status: Status::parse(&m.status).unwrap_or(Status::Conflicted),
        amount: m.amount,
        capture_method: if m.capture_method == "manual" {
            CaptureMethod::Manual
        } else {
            CaptureMethod::Automatic
        },
        authorized: m.amount_authorized,
        captured: m.amount_captured,
        refunded: m.amount_refunded,
        attempts: m.confirm_attempts,
        max_attempts: m.max_attempts,
        captured_at: m.captured_at,
    }
}

/// Writes the machine's new state into a copy of the row.
pub fn with_state(m: &payment::Model, s: &State, now: DateTime<Utc>) -> payment::Model {
    let mut next = m.clone();
    next.status = s.status.as_str().to_owned();
    next.amount = s.amount;
    next.amount_authorized = s.authorized;
    next.amount_captured = s.captured;
    next.amount_refunded = s.refunded;
    next.confirm_attempts = s.attempts;
    next.captured_at = s.captured_at;
    next.updated_at = now;
    next
}

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error("another writer changed the payment first")]
    LostRace,
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// Inserts a new payment with its first history row and expiry job.
pub async fn insert(
    db: &DatabaseConnection,
    m: payment::Model,
    now: DateTime<Utc>,
) -> Result<payment::Model, DbErr> {
    let txn = db.begin().await?;
    let row = m.clone().into_active_model().reset_all();
    payment::Entity::insert(row)
        .exec_without_returning(&txn)
        .await?;
    history(&txn, &m.id, None, &m.status, "create", now).await?;
    sync_jobs(&txn, &m, now, Duration::zero(), Jobs::None).await?;
    txn.commit().await?;
    Ok(m)
}

/// What a commit wrote.
pub struct Committed {
    pub payment: payment::Model,
    pub refund: Option<refund::Model>,
    /// Webhook deliveries queued by its events.
    pub deliveries: usize,
}

/// Replaces the row if nobody wrote since `before` (compare-and-set on `version`), with its
/// history row, attempts and jobs, in one transaction.
pub async fn commit(
    db: &DatabaseConnection,
    before: &payment::Model,
    mut after: payment::Model,
    changes: Changes,
    settle_delay: Duration,
) -> Result<Committed, CommitError> {
    after.version = before.version + 1;
    let now = after.updated_at;
    let txn = db.begin().await?;
    let row = after.clone().into_active_model().reset_all();
    let updated = payment::Entity::update_many()
        .set(row)
        .filter(payment::Column::Id.eq(before.id.as_str()))
        .filter(payment::Column::Version.eq(before.version))
        .exec(&txn)
        .await?;
    if updated.rows_affected != 1 {
        txn.rollback().await?;
        return Err(CommitError::LostRace);
    }
    if after.status != before.status {
        history(
            &txn,
            &after.id,
            Some(&before.status),
            &after.status,
            changes.trigger,
            now,
        )
        .await?;
    }
    for a in changes.attempts {
        a.into_active_model().reset_all().insert(&txn).await?;
    }
    sync_jobs(&txn, &after, now, settle_delay, Jobs::Unknown).await?;
    let mut deliveries = 0;
    if let Some(save) = changes.save {
        deliveries += save_card(&txn, &after, save, now).await?;
    }
    if let Some(mandate) = changes.spend_mandate {
        if customers::store::set_mandate_status(&txn, &mandate, "inactive", now)
            .await?
            .is_none()
        {
            return Err(CommitError::LostRace);
        }
    }
    let refund = match changes.refund {
        Some(r) => Some(write_refund(&txn, r, now, settle_delay).await?),
        None => None,
    };
    if let Some(d) = &changes.dispute {
        deliveries += disputes::store::insert(&txn, d, now).await?;
    }
    if let Some(due) = changes.dispute_due {
        scheduler::schedule_if_absent(&txn, now, DISPUTE_OPEN_JOB, &after.id, due).await?;
    }
    for e in changes.events {
        deliveries += outbox::record(
            &txn,
            NewEvent {
                merchant_id: &after.merchant_id,
                profile_id: Some(&after.profile_id),
                test_mode: after.test_mode,
                event_type: e.event_type,
                object_id: &e.object_id,
                content_type: e.content_type,
                object: e.object,
            },
            now,
        )
        .await?;
    }
    txn.commit().await?;
    Ok(Committed {
        payment: after,
        refund,
        deliveries,
    })
}

/// Saves the card (once per fingerprint) and creates its mandate, announcing `mandate_active`
/// (returns the deliveries queued). A customer deleted meanwhile gets nothing saved.
async fn save_card(
    db: &impl ConnectionTrait,
    p: &payment::Model,
    save: SaveCard,
    now: DateTime<Utc>,
) -> Result<usize, DbErr> {
    let Some(customer) = payd_entity::customer::Entity::find_by_id(save.customer_id.as_str())
        .one(db)
        .await?
        .filter(|c| c.redacted_at.is_none())
    else {
        return Ok(0);
    };
    let pm = customers::store::save_card(db, &customer, &save.card, now).await?;
    if let Some((terms, id)) = save.mandate {
        let mandate = customers::store::insert_mandate(
            db,
            &id,
            &p.profile_id,
            &customer,
            &pm.id,
            terms.single_use,
            terms.amount_limit,
            Some(terms.currency),
            terms.ends_at,
            now,
        )
        .await?;
        return customers::store::record_mandate_event(db, &mandate, "mandate_active", now).await;
    }
    Ok(0)
}

/// Inserts a new refund or updates a changed one (compare-and-set on its version), and keeps
/// its settle job exactly while it is pending.
async fn write_refund(
    db: &impl ConnectionTrait,
    mut r: refund::Model,
    now: DateTime<Utc>,
    settle_delay: Duration,
) -> Result<refund::Model, CommitError> {
    if r.version == 0 {
        r.version = 1;
        r.clone().into_active_model().reset_all().insert(db).await?;
    } else {
        let expected = r.version;
        r.version += 1;
        let updated = refund::Entity::update_many()
            .set(r.clone().into_active_model().reset_all())
            .filter(refund::Column::Id.eq(r.id.as_str()))
            .filter(refund::Column::Version.eq(expected))
            .exec(db)
            .await?;
        if updated.rows_affected != 1 {
            return Err(CommitError::LostRace);
        }
    }
    if matches!(r.status.as_str(), "pending" | "manual_review") {
        resync_refund_job(db, &r, now, settle_delay).await?;
    } else {
        scheduler::cancel(db, REFUND_SETTLE_JOB, &r.id).await?;
    }
    Ok(r)
}

/// Keeps a still-pending refund's settle job (after a sync that changed nothing).
pub async fn resync_refund_job(
    db: &impl ConnectionTrait,
    r: &refund::Model,
    now: DateTime<Utc>,
    settle_delay: Duration,
) -> Result<(), DbErr> {
    let due = now + settle_delay;
    scheduler::schedule(
        db,
        now,
        REFUND_SETTLE_JOB,
        &r.id,
        due,
        serde_json::Value::Null,
    )
    .await
}

pub async fn find_refund(
    db: &impl ConnectionTrait,
    id: &str,
) -> Result<Option<refund::Model>, DbErr> {
    refund::Entity::find_by_id(id).one(db).await
}

/// Re-schedules the payment's jobs as its status needs them (after a job that changed
/// nothing, so that its row is not lost).
pub async fn resync_jobs(
    db: &DatabaseConnection,
    m: &payment::Model,
    now: DateTime<Utc>,
    settle_delay: Duration,
) -> Result<(), DbErr> {
    sync_jobs(db, m, now, settle_delay, Jobs::Unknown).await
}

async fn history(
    db: &impl ConnectionTrait,
    payment_id: &str,
    from: Option<&str>,
    to: &str,
    trigger: &str,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    payment_status_history::ActiveModel {
        id: Set(new_id("psh")),
        payment_id: Set(payment_id.to_owned()),
        from_status: Set(from.map(str::to_owned)),
        to_status: Set(to.to_owned()),
        trigger: Set(trigger.to_owned()),
        created_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// Which jobs a payment may already have.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Jobs {
    /// None: the payment is being inserted.
    None,
    Unknown,
}

/// Invariant: a payment has an expiry job exactly while it can expire, and a settle job
/// exactly while it waits for the processor.
async fn sync_jobs(
    db: &impl ConnectionTrait,
    m: &payment::Model,
    now: DateTime<Utc>,
    settle_delay: Duration,
    existing: Jobs,
) -> Result<(), DbErr> {
    let mut stale = Vec::with_capacity(2);
    let status = Status::parse(&m.status).unwrap_or(Status::Conflicted);
    let expiry = if status.is_unconfirmed() || status == Status::RequiresCustomerAction {
        Some(m.expires_at)
    } else if status.is_capturable() {
        m.capture_before
    } else {
        None
    };
    match expiry {
        Some(at) => {
            scheduler::schedule(db, now, EXPIRY_JOB, &m.id, at, serde_json::Value::Null).await?
        }
        None => stale.push(EXPIRY_JOB),
    }
    let pending = matches!(
        status,
        Status::Processing
            | Status::RequiresMerchantAction
            | Status::PartiallyCapturedAndProcessing
    );
    if pending {
        scheduler::schedule(
            db,
            now,
            SETTLE_JOB,
            &m.id,
            now + settle_delay,
            serde_json::Value::Null,
        )
        .await?;
    } else {
        stale.push(SETTLE_JOB);
    }
    if existing == Jobs::Unknown {
        scheduler::cancel_kinds(db, &stale, &m.id).await?;
    }
    Ok(())
}

pub async fn find(db: &impl ConnectionTrait, id: &str) -> Result<Option<payment::Model>, DbErr> {
    payment::Entity::find_by_id(id).one(db).await
}

/// A payment of this merchant and mode; `None` for anyone else's.
pub async fn find_owned(
    db: &impl ConnectionTrait,
    id: &str,
    merchant_id: &str,
    test_mode: bool,
) -> Result<Option<payment::Model>, DbErr> {
    Ok(find(db, id)
        .await?
        .filter(|p| p.merchant_id == merchant_id && p.test_mode == test_mode))
}

pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    f: &ListPaymentsRequest,
    page: &Page,
) -> Result<List<payment::Model>, DbErr> {
    let mut q = payment::Entity::find()
        .filter(payment::Column::MerchantId.eq(merchant_id))
        .filter(payment::Column::TestMode.eq(test_mode));
    if let Some(s) = &f.status {
        q = q.filter(payment::Column::Status.eq(s.as_str()));
    }
    if let Some(c) = &f.currency {
        q = q.filter(payment::Column::Currency.eq(c.as_str()));
    }
    if let Some(c) = &f.customer_id {
        q = q.filter(payment::Column::CustomerId.eq(c.as_str()));
    }
    if let Some(a) = f.amount_gte {
        q = q.filter(payment::Column::Amount.gte(a));
    }
    if let Some(a) = f.amount_lte {
        q = q.filter(payment::Column::Amount.lte(a));
    }
    if let Some(t) = f.created_after {
        q = q.filter(payment::Column::CreatedAt.gt(t));
    }
    if let Some(t) = f.created_before {
        q = q.filter(payment::Column::CreatedAt.lt(t));
    }
    paginate(db, q, payment::Column::Id, page).await
}

pub async fn attempts(
    db: &impl ConnectionTrait,
    payment_id: &str,
) -> Result<Vec<payment_attempt::Model>, DbErr> {
    payment_attempt::Entity::find()
        .filter(payment_attempt::Column::PaymentId.eq(payment_id))
        .order_by_asc(payment_attempt::Column::Number)
        .order_by_asc(payment_attempt::Column::Id)
        .all(db)
        .await
}

pub async fn history_of(
    db: &impl ConnectionTrait,
    payment_id: &str,
) -> Result<Vec<payment_status_history::Model>, DbErr> {
    payment_status_history::Entity::find()
        .filter(payment_status_history::Column::PaymentId.eq(payment_id))
        .order_by_asc(payment_status_history::Column::Id)
        .all(db)
        .await
}

/// The shop's processor accounts, in creation order.
pub async fn accounts(
    db: &impl ConnectionTrait,
    profile_id: &str,
) -> Result<Vec<processor_account::Model>, DbErr> {
    processor_account::Entity::find()
        .filter(processor_account::Column::ProfileId.eq(profile_id))
        .order_by_asc(processor_account::Column::Id)
        .all(db)
        .await
}

/// Adds a processor account; `None` when the shop has one of that name. `config` is the JSON
/// of a remote account's connection.
pub async fn insert_account(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    profile_id: &str,
    name: &str,
    config: Option<String>,
    now: DateTime<Utc>,
) -> Result<Option<processor_account::Model>, DbErr> {
    let row = processor_account::Model {
        id: new_id("proc"),
        merchant_id: merchant_id.to_owned(),
        profile_id: profile_id.to_owned(),
        name: name.to_owned(),
        kind: if config.is_some() {
            "remote"
        } else {
            "sandbox"
        }
        .to_owned(),
        enabled: true,
        config,
        created_at: now,
    };
    let inserted = processor_account::Entity::insert(row.clone().into_active_model().reset_all())
        .on_conflict_do_nothing_on([
            processor_account::Column::ProfileId,
            processor_account::Column::Name,
        ])
        .exec_without_returning(db)
        .await?;
    Ok(matches!(inserted, sea_orm::TryInsertResult::Inserted(n) if n > 0).then_some(row))
}

pub async fn routing_rules(
    db: &impl ConnectionTrait,
    profile_id: &str,
) -> Result<RoutingRules, DbErr> {
    Ok(routing_config::Entity::find_by_id(profile_id)
        .one(db)
        .await?
        .and_then(|r| serde_json::from_str(&r.rules).ok())
        .unwrap_or_default())
}

pub async fn put_routing_rules(
    db: &impl ConnectionTrait,
    profile_id: &str,
    rules: &RoutingRules,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let row = routing_config::ActiveModel {
        profile_id: Set(profile_id.to_owned()),
        rules: Set(serde_json::to_string(rules).unwrap_or_default()),
        updated_at: Set(now),
    };
    routing_config::Entity::insert(row)
        .on_conflict(
            sea_orm::sea_query::OnConflict::column(routing_config::Column::ProfileId)
                .update_columns([
                    routing_config::Column::Rules,
                    routing_config::Column::UpdatedAt,
                ])
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}
