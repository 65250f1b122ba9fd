//! Persistence of disputes, their evidence and uploaded files. A dispute's change, its
//! evidence rows, its event and its jobs commit in one transaction guarded by its `version`.

use chrono::{DateTime, Duration, Utc};
use payd_entity::{dispute, dispute_evidence, file};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait,
    IntoActiveModel, QueryFilter, QueryOrder, TransactionTrait,
};

use super::{
    api::{Dispute, ListDisputesQuery},
    machine::Status,
};
use crate::{
    events::outbox::{self, NewEvent},
    pagination::{paginate, List, Page},
    scheduler,
};

/// Scheduled job: the response deadline of an opened dispute.
pub const DEADLINE_JOB: &str = "dispute_deadline";
/// Scheduled job: the processor's decision on a challenged dispute.
pub const RESOLVE_JOB: &str = "dispute_resolve";

/// At most this many files per dispute.
pub const MAX_EVIDENCE: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error("another writer changed the dispute first")]
    LostRace,
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// What a dispute's change does to its evidence.
pub enum EvidenceChange {
    None,
    Attach(dispute_evidence::Model),
    Remove { file_id: String },
}

/// The dispute's event, as the outbox records it.
pub fn record_event<'a>(d: &'a dispute::Model, event_type: &'a str) -> NewEvent<'a> {
    NewEvent {
        merchant_id: &d.merchant_id,
        profile_id: Some(&d.profile_id),
        test_mode: d.test_mode,
        event_type,
        object_id: &d.id,
        content_type: "dispute_details",
        object: serde_json::to_string(&Dispute::render(d)).unwrap_or_default(),
    }
}

/// Inserts a new dispute with its `dispute_opened` event and deadline job, in the caller's
/// transaction (the payment's, whose actor opens disputes); returns the deliveries queued.
pub async fn insert(
    db: &impl ConnectionTrait,
    d: &dispute::Model,
    now: DateTime<Utc>,
) -> Result<usize, DbErr> {
    d.clone().into_active_model().reset_all().insert(db).await?;
    let deliveries = outbox::record(db, record_event(d, Status::Opened.event()), now).await?;
    sync_jobs(db, d, now, Duration::zero()).await?;
    Ok(deliveries)
}

/// Replaces the row if nobody wrote since `before`, with the evidence change, the event of a
/// new status and the jobs the new status needs, in one transaction. Returns the row and the
/// webhook deliveries queued.
pub async fn commit(
    db: &DatabaseConnection,
    before: &dispute::Model,
    mut after: dispute::Model,
    evidence: EvidenceChange,
    resolve_delay: Duration,
) -> Result<(dispute::Model, usize), CommitError> {
    after.version = before.version + 1;
    let now = after.updated_at;
    let txn = db.begin().await?;
    let updated = dispute::Entity::update_many()
        .set(after.clone().into_active_model().reset_all())
        .filter(dispute::Column::Id.eq(before.id.as_str()))
        .filter(dispute::Column::Version.eq(before.version))
        .exec(&txn)
        .await?;
    if updated.rows_affected != 1 {
        txn.rollback().await?;
        return Err(CommitError::LostRace);
    }
    match evidence {
        EvidenceChange::None => {}
        EvidenceChange::Attach(e) => {
            dispute_evidence::Entity::delete_many()
                .filter(dispute_evidence::Column::DisputeId.eq(e.dispute_id.as_str()))
                .filter(dispute_evidence::Column::FileId.eq(e.file_id.as_str()))
                .exec(&txn)
                .await?;
            e.into_active_model().reset_all().insert(&txn).await?;
        }
        EvidenceChange::Remove { file_id } => {
            dispute_evidence::Entity::delete_many()
                .filter(dispute_evidence::Column::DisputeId.eq(after.id.as_str()))
                .filter(dispute_evidence::Column::FileId.eq(file_id))
                .exec(&txn)
                .await?;
        }
    }
    let mut deliveries = 0;
    if after.status != before.status {
        if let Some(status) = Status::parse(&after.status) {
            deliveries = outbox::record(&txn, record_event(&after, status.event()), now).await?;
        }
    }
    sync_jobs(&txn, &after, now, resolve_delay).await?;
    txn.commit().await?;
    Ok((after, deliveries))
}

/// Invariant: an opened dispute has a deadline job, a challenged one a resolve job, and a
/// closed one neither.
async fn sync_jobs(
    db: &impl ConnectionTrait,
    d: &dispute::Model,
    now: DateTime<Utc>,
    resolve_delay: Duration,
) -> Result<(), DbErr> {
    let null = serde_json::Value::Null;
    match Status::parse(&d.status) {
        Some(Status::Opened) => {
            scheduler::schedule(db, now, DEADLINE_JOB, &d.id, d.evidence_due_by, null).await
        }
        Some(Status::Challenged) => {
            scheduler::cancel(db, DEADLINE_JOB, &d.id).await?;
            let submitted = d.evidence_submitted_at.unwrap_or(now);
            scheduler::schedule(db, now, RESOLVE_JOB, &d.id, submitted + resolve_delay, null).await
        }
        _ => scheduler::cancel_kinds(db, &[DEADLINE_JOB, RESOLVE_JOB], &d.id).await,
    }
}

pub async fn find(db: &impl ConnectionTrait, id: &str) -> Result<Option<dispute::Model>, DbErr> {
    dispute::Entity::find_by_id(id).one(db).await
}

/// A dispute of this merchant and mode; `None` for anyone else's.
pub async fn find_owned(
    db: &impl ConnectionTrait,
    id: &str,
    merchant_id: &str,
    test_mode: bool,
) -> Result<Option<dispute::Model>, DbErr> {
    Ok(find(db, id)
        .await?
        .filter(|d| d.merchant_id == merchant_id && d.test_mode == test_mode))
}

/// Every dispute of a payment, oldest first.
pub async fn of_payment(
    db: &impl ConnectionTrait,
    payment_id: &str,
) -> Result<Vec<dispute::Model>, DbErr> {
    dispute::Entity::find()
        .filter(dispute::Column::PaymentId.eq(payment_id))
        .order_by_asc(dispute::Column::Id)
        .all(db)
        .await
}

pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    f: &ListDisputesQuery,
    page: &Page,
) -> Result<List<dispute::Model>, DbErr> {
    let mut q = dispute::Entity::find()
        .filter(dispute::Column::MerchantId.eq(merchant_id))
        .filter(dispute::Column::TestMode.eq(test_mode));
    if let Some(p) = &f.payment_id {
        q = q.filter(dispute::Column::PaymentId.eq(p.as_str()));
    }
    if let Some(s) = &f.status {
        q = q.filter(dispute::Column::Status.eq(s.as_str()));
    }
    if let Some(s) = &f.stage {
        q = q.filter(dispute::Column::Stage.eq(s.as_str()));
    }
    if let Some(t) = f.created_after {
        q = q.filter(dispute::Column::CreatedAt.gt(t));
    }
    if let Some(t) = f.created_before {
        q = q.filter(dispute::Column::CreatedAt.lt(t));
    }
    paginate(db, q, dispute::Column::Id, page).await
}

/// The dispute's evidence with each file, in the order attached.
pub async fn evidence(
    db: &impl ConnectionTrait,
    dispute_id: &str,
) -> Result<Vec<(dispute_evidence::Model, file::Model)>, DbErr> {
    let rows = dispute_evidence::Entity::find()
        .filter(dispute_evidence::Column::DisputeId.eq(dispute_id))
        .order_by_asc(dispute_evidence::Column::CreatedAt)
        .order_by_asc(dispute_evidence::Column::FileId)
        .all(db)
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for e in rows {
        if let Some(f) = file::Entity::find_by_id(e.file_id.as_str()).one(db).await? {
            out.push((e, f));
        }
    }
    Ok(out)
}
