//! Persistence of disputes, their evidence and uploaded files. A dispute's change, its
//! evidence rows, its event and its jobs commit in one transaction guarded by its `version`.

use chrono::{DateTime, Duration, Utc};
use payd_entity::{dispute, dispute_evidence, file, processor_account};
use sea_orm::{
    sea_query::OnConflict, ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait,
    IntoActiveModel, QueryFilter, QueryOrder, QueryTrait,
};

use super::{
    api::{Dispute, ListDisputesQuery},
    machine::Status,
};
use crate::commit::Db;
use crate::{
    commit::{self, Change, Event, Job, Write},
    ledger,
    pagination::{created_between, paginate, List, Page, PageError},
};

/// Scheduled job: the response deadline of an opened dispute.
pub const DEADLINE_JOB: &str = "dispute_deadline";
/// Scheduled job: the processor's decision on a challenged dispute.
pub const RESOLVE_JOB: &str = "dispute_resolve";

/// At most this many files per dispute.
pub const MAX_EVIDENCE: usize = 20;

pub use crate::commit::CommitError;

/// What a dispute's change does to its evidence.
pub enum EvidenceChange {
    None,
    Attach(dispute_evidence::Model),
    Remove { file_id: String },
}

/// The dispute's event.
pub fn event(d: &dispute::Model, event_type: &str) -> Event {
    Event {
        merchant_id: d.merchant_id.clone(),
        profile_id: Some(d.profile_id.clone()),
        test_mode: d.test_mode,
        event_type: event_type.to_owned(),
        object_id: d.id.to_string(),
        content_type: "dispute_details",
        object: serde_json::to_string(&Dispute::render(d)).unwrap_or_default(),
    }
}

/// A new dispute with its `dispute_opened` event and deadline job: part of the payment's
/// change (the payment's actor opens disputes).
pub fn insert(d: &dispute::Model, now: DateTime<Utc>) -> Change {
    // A case has one dispute (`case_id` is unique): the insert must add its row, else another
    // writer opened the case's dispute first and this change is a lost race.
    let insert = dispute::Entity::insert(d.clone().into_active_model().reset_all())
        .on_conflict(
            OnConflict::column(dispute::Column::CaseId)
                .do_nothing()
                .to_owned(),
        )
        .into_query();
    Change::at(now)
        .write(Write::InsertNew(insert))
        .event(event(d, Status::Opened.event()))
        .and(jobs(d, now, Duration::zero()))
}

/// Replaces the row if nobody wrote since `before`, with the evidence change, the event of a
/// new status and the jobs the new status needs, in one commit. Returns the row and the
/// webhook deliveries queued.
pub async fn commit(
    db: &Db,
    before: &dispute::Model,
    mut after: dispute::Model,
    evidence: EvidenceChange,
    resolve_delay: Duration,
) -> Result<(dispute::Model, usize), CommitError> {
    after.version = before.version + 1;
    let now = after.updated_at;
    let mut change = Change::at(now).write(Write::Cas(
        dispute::Entity::update_many()
            .set(after.clone().into_active_model().reset_all())
            .filter(dispute::Column::Id.eq(before.id.as_str()))
            .filter(dispute::Column::Version.eq(before.version))
            .into_query(),
    ));
    let remove = |file_id: &str| {
        Write::Delete(
            dispute_evidence::Entity::delete_many()
                .filter(dispute_evidence::Column::DisputeId.eq(after.id.as_str()))
                .filter(dispute_evidence::Column::FileId.eq(file_id))
                .into_query(),
        )
    };
    match evidence {
        EvidenceChange::None => {}
        EvidenceChange::Attach(e) => {
            change = change.write(remove(&e.file_id)).write(commit::insert(e));
        }
        EvidenceChange::Remove { file_id } => change = change.write(remove(&file_id)),
    }
    // The buyer keeps a dispute lost, accepted or expired: the shop's ledger gives it up.
    if after.status.buyer_kept() && !before.status.buyer_kept() {
        let account = ledger::store::Account {
            merchant_id: &after.merchant_id,
            profile_id: &after.profile_id,
            test_mode: after.test_mode,
            currency: &after.currency,
        };
        let moves = ledger::machine::dispute_moves(after.amount);
        for w in ledger::store::writes(&account, &moves, &after.id, now) {
            change = change.write(w);
        }
    }
    // A new stage is announced like a new status: the event of the status, with the stage.
    if after.status != before.status || after.stage != before.stage {
        change = change.event(event(&after, after.status.event()));
    }
    change = change.and(jobs(&after, now, resolve_delay));
    let committed = commit::commit(db, change).await?;
    Ok((after, committed.deliveries))
}

/// Invariant: an opened dispute has a deadline job, a challenged one a resolve job, and a
/// closed one neither; one that follows a wallet case has none (the case's processor decides).
fn jobs(d: &dispute::Model, now: DateTime<Utc>, resolve_delay: Duration) -> Change {
    let change = Change::at(now);
    let id = d.id.to_string();
    let status = Some(d.status).filter(|_| d.case_id.is_none());
    match status {
        Some(Status::Opened) => change.job(Job::Schedule {
            kind: DEADLINE_JOB,
            entity_id: id,
            at: d.evidence_due_by,
        }),
        Some(Status::Challenged) => {
            let submitted = d.evidence_submitted_at.unwrap_or(now);
            change
                .job(Job::Cancel {
                    kinds: vec![DEADLINE_JOB],
                    entity_id: id.clone(),
                })
                .job(Job::Schedule {
                    kind: RESOLVE_JOB,
                    entity_id: id,
                    at: submitted + resolve_delay,
                })
        }
        _ => change.job(Job::Cancel {
            kinds: vec![DEADLINE_JOB, RESOLVE_JOB],
            entity_id: id,
        }),
    }
}

pub async fn find(
    db: &impl ConnectionTrait,
    id: &crate::ids::DisputeId,
) -> Result<Option<dispute::Model>, DbErr> {
    dispute::Entity::find_by_id(id.clone()).one(db).await
}

/// The processor account that holds a dispute: the shop's account of the dispute's
/// `processor` name, in its mode.
pub async fn processor_account(
    db: &impl ConnectionTrait,
    d: &dispute::Model,
) -> Result<Option<processor_account::Model>, DbErr> {
    let Some(name) = &d.processor else {
        return Ok(None);
    };
    processor_account::Entity::find()
        .filter(processor_account::Column::ProfileId.eq(&d.profile_id))
        .filter(processor_account::Column::TestMode.eq(d.test_mode))
        .filter(processor_account::Column::Name.eq(name))
        .one(db)
        .await
}

/// The dispute following a wallet case.
pub async fn by_case(
    db: &impl ConnectionTrait,
    case_id: &str,
) -> Result<Option<dispute::Model>, DbErr> {
    dispute::Entity::find()
        .filter(dispute::Column::CaseId.eq(case_id))
        .one(db)
        .await
}

/// The disputes following these wallet cases.
pub async fn by_cases(
    db: &impl ConnectionTrait,
    case_ids: &[String],
) -> Result<Vec<dispute::Model>, DbErr> {
    dispute::Entity::find()
        .filter(dispute::Column::CaseId.is_in(case_ids.iter().map(String::as_str)))
        .all(db)
        .await
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

/// The disputes of `merchant_id` in this mode, of shop `profile_id` if one is given.
pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: Option<&str>,
    f: &ListDisputesQuery,
    page: &Page,
) -> Result<List<dispute::Model>, PageError> {
    let mut q = dispute::Entity::find()
        .filter(dispute::Column::MerchantId.eq(merchant_id))
        .filter(dispute::Column::TestMode.eq(test_mode));
    if let Some(p) = profile_id {
        q = q.filter(dispute::Column::ProfileId.eq(p));
    }
    let visible = q.clone();
    if let Some(p) = &f.payment_id {
        q = q.filter(dispute::Column::PaymentId.eq(p.as_str()));
    }
    if let Some(s) = &f.status {
        q = q.filter(dispute::Column::Status.eq(s.as_str()));
    }
    if let Some(s) = &f.stage {
        q = q.filter(dispute::Column::Stage.eq(s.as_str()));
    }
    q = created_between(
        q,
        dispute::Column::CreatedAt,
        f.created_after,
        f.created_before,
    );
    paginate(db, visible, q, dispute::Column::Id, page).await
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
        if let Some(f) = file::Entity::find_by_id(e.file_id.clone()).one(db).await? {
            out.push((e, f));
        }
    }
    Ok(out)
}

/// What a processor says of a dispute it opens on a payment.
pub struct Opening {
    pub stage: super::machine::Stage,
    pub amount: i64,
    pub reason: String,
    pub processor: Option<String>,
    pub processor_reference: Option<String>,
    pub evidence_due_by: DateTime<Utc>,
    /// The wallet case it follows, if any.
    pub case_id: Option<String>,
}

/// The row of a dispute opened on `payment` at `now` (`opened`, version 1), as the payment's
/// commit inserts it.
pub fn opened(
    payment: &payd_entity::payment::Model,
    o: Opening,
    now: DateTime<Utc>,
) -> dispute::Model {
    dispute::Model {
        id: crate::ids::DisputeId::new(),
        payment_id: payment.id.clone(),
        merchant_id: payment.merchant_id.clone(),
        profile_id: payment.profile_id.clone(),
        test_mode: payment.test_mode,
        stage: o.stage,
        status: Status::Opened,
        amount: o.amount,
        currency: payment.currency.clone(),
        reason: o.reason,
        processor: o.processor,
        processor_reference: o.processor_reference,
        evidence_due_by: o.evidence_due_by,
        evidence_submitted_at: None,
        explanation: None,
        case_id: o.case_id,
        case_version: None,
        version: 1,
        created_at: now,
        updated_at: now,
    }
}
