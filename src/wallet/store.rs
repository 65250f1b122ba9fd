//! The sandbox wallet processor's records: its seller cases, each change under a compare-and-set
//! on the case's version together with the history entries that tell it and the job of the
//! processor's next move, in one commit.

use chrono::{DateTime, Utc};
use payd_entity::{wallet_case, wallet_case_entry};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryOrder, QuerySelect, QueryTrait,
};

use super::{
    api::ListCasesQuery,
    machine::{Case, Changed},
};
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    commit::{self, Change, Job, Write},
    pagination::{created_between, paginate, List, Page, PageError},
};

pub use crate::commit::CommitError;

/// Scheduled job: the processor's next move on a case (a reply, a review, a deadline).
pub const DUE_JOB: &str = "wallet_case_due";

/// The machine's view of a stored case.
pub fn case_of(row: &wallet_case::Model) -> Case {
    Case {
        case_type: row.case_type,
        status: row.status,
        outcome: row.outcome,
        amount: row.amount,
        offer_amount: row.offer_amount,
        return_shipped: row.return_shipped,
        note: row.note.clone(),
        due_at: row.due_at,
    }
}

/// `row` with the case's new state.
fn with_case(row: &wallet_case::Model, c: &Case, now: DateTime<Utc>) -> wallet_case::Model {
    wallet_case::Model {
        case_type: c.case_type,
        status: c.status,
        outcome: c.outcome,
        amount: c.amount,
        offer_amount: c.offer_amount,
        return_shipped: c.return_shipped,
        note: c.note.clone(),
        due_at: c.due_at,
        updated_at: now,
        ..row.clone()
    }
}

/// The rows of a change's history entries, numbered after the case's `entries` so far.
fn entry_rows(
    case_id: &str,
    first: i64,
    changed: &Changed,
    now: DateTime<Utc>,
) -> Vec<wallet_case_entry::Model> {
    changed
        .entries
        .iter()
        .zip(first..)
        .map(|(e, seq)| wallet_case_entry::Model {
            case_id: case_id.to_owned(),
            seq,
            actor: e.actor,
            kind: e.kind,
            case_type: e.case_type,
            status_from: e.status.map(|(from, _)| from),
            status_to: e.status.map(|(_, to)| to),
            message: e.message.clone(),
            amount: e.amount,
            file_ids: (!e.file_ids.is_empty()).then(|| Json(e.file_ids.clone())),
            created_at: now,
        })
        .collect()
}

/// Invariant: a case the processor will act on has one due job, at `due_at`; a resolved one
/// has none.
fn due_job(row: &wallet_case::Model) -> Job {
    match row.due_at {
        Some(at) => Job::Schedule {
            kind: DUE_JOB,
            entity_id: row.id.clone(),
            at,
        },
        None => Job::Cancel {
            kinds: vec![DUE_JOB],
            entity_id: row.id.clone(),
        },
    }
}

/// A new case (`row` holds who and what it is against) in the state `opened` made, with its
/// first history entry and its due job.
pub async fn insert(
    db: &Db,
    row: wallet_case::Model,
    opened: &Changed,
    now: DateTime<Utc>,
) -> Result<wallet_case::Model, CommitError> {
    let mut row = with_case(&row, &opened.case, now);
    let entries = entry_rows(&row.id, 1, opened, now);
    row.entries = entries.len() as i64;
    let mut change = Change::at(now).write(commit::insert(row.clone()));
    for e in entries {
        change = change.write(commit::insert(e));
    }
    commit::commit(db, change.job(due_job(&row))).await?;
    Ok(row)
}

/// Writes `changed` over `before` if nobody wrote since, with its entries and due job.
pub async fn commit(
    db: &Db,
    before: &wallet_case::Model,
    changed: &Changed,
    now: DateTime<Utc>,
) -> Result<wallet_case::Model, CommitError> {
    let mut after = with_case(before, &changed.case, now);
    let entries = entry_rows(&before.id, before.entries + 1, changed, now);
    after.entries = before.entries + entries.len() as i64;
    after.version = before.version + 1;
    let mut change = Change::at(now).write(Write::Cas(
        wallet_case::Entity::update_many()
            .set(after.clone().into_active_model().reset_all())
            .filter(wallet_case::Column::Id.eq(before.id.as_str()))
            .filter(wallet_case::Column::Version.eq(before.version))
            .into_query(),
    ));
    for e in entries {
        change = change.write(commit::insert(e));
    }
    commit::commit(db, change.job(due_job(&after))).await?;
    Ok(after)
}

pub async fn find(
    db: &impl ConnectionTrait,
    id: &str,
) -> Result<Option<wallet_case::Model>, DbErr> {
    wallet_case::Entity::find_by_id(id).one(db).await
}

/// The case held against a payment, if any (one per payment).
pub async fn of_payment(
    db: &impl ConnectionTrait,
    payment_id: &str,
) -> Result<Option<wallet_case::Model>, DbErr> {
    wallet_case::Entity::find()
        .filter(wallet_case::Column::PaymentId.eq(payment_id))
        .one(db)
        .await
}

/// The cases of `merchant_id` in this mode, of shop `profile_id` if one is given.
pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: Option<&str>,
    f: &ListCasesQuery,
    page: &Page,
) -> Result<List<wallet_case::Model>, PageError> {
    let mut q = wallet_case::Entity::find()
        .filter(wallet_case::Column::MerchantId.eq(merchant_id))
        .filter(wallet_case::Column::TestMode.eq(test_mode));
    if let Some(p) = profile_id {
        q = q.filter(wallet_case::Column::ProfileId.eq(p));
    }
    let visible = q.clone();
    if let Some(p) = &f.payment_id {
        q = q.filter(wallet_case::Column::PaymentId.eq(p.as_str()));
    }
    if let Some(s) = &f.status {
        q = q.filter(wallet_case::Column::Status.eq(s.as_str()));
    }
    if let Some(t) = &f.case_type {
        q = q.filter(wallet_case::Column::CaseType.eq(t.as_str()));
    }
    q = created_between(
        q,
        wallet_case::Column::CreatedAt,
        f.created_after,
        f.created_before,
    );
    paginate(db, visible, q, wallet_case::Column::Id, page).await
}

/// Every case of `merchant_id` in this mode (of one shop, if given), oldest first, at most
/// `limit`, after `after` (an id).
pub async fn all(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: Option<&str>,
    after: Option<&str>,
    limit: u64,
) -> Result<Vec<wallet_case::Model>, DbErr> {
    let mut q = wallet_case::Entity::find()
        .filter(wallet_case::Column::MerchantId.eq(merchant_id))
        .filter(wallet_case::Column::TestMode.eq(test_mode));
    if let Some(p) = profile_id {
        q = q.filter(wallet_case::Column::ProfileId.eq(p));
    }
    if let Some(a) = after {
        q = q.filter(wallet_case::Column::Id.gt(a));
    }
    q.order_by_asc(wallet_case::Column::Id)
        .limit(limit)
        .all(db)
        .await
}

/// A case's history, oldest first.
pub async fn history(
    db: &impl ConnectionTrait,
    case_id: &str,
) -> Result<Vec<wallet_case_entry::Model>, DbErr> {
    wallet_case_entry::Entity::find()
        .filter(wallet_case_entry::Column::CaseId.eq(case_id))
        .order_by_asc(wallet_case_entry::Column::Seq)
        .all(db)
        .await
}
