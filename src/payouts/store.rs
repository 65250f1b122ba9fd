//! Persistence of payouts. A payout's change commits under a compare-and-set on its
//! `version`, with the ledger entries it causes (its reservation under the shop's lock row and
//! the condition that the available balance covers it), its event and its sync job, in one
//! transaction.

use chrono::{DateTime, Utc};
use payd_entity::payout;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryTrait,
};

use super::{
    api::{ListPayoutsQuery, Payout},
    machine::{self, Status},
};
use crate::commit::Db;
use crate::{
    commit::{self, Change, Event, Job, Write},
    ledger::{self, machine as book},
    pagination::{created_between, paginate, List, Page, PageError},
};

pub use crate::commit::CommitError;

/// Scheduled job: asks the processor about a payout it has (a submission whose answer was
/// lost, a pending payout's settlement, a paid one's reversal).
pub const SYNC_JOB: &str = "payout_sync";

/// Scheduled job: expires a payout that never went to the processor.
pub const EXPIRY_JOB: &str = "payout_expiry";

pub fn event(m: &payout::Model, event_type: &str) -> Event {
    Event {
        merchant_id: m.merchant_id.clone(),
        profile_id: Some(m.profile_id.clone()),
        test_mode: m.test_mode,
        event_type: event_type.to_owned(),
        object_id: m.id.to_string(),
        content_type: "payout_details",
        object: serde_json::to_string(&Payout::render(m)).unwrap_or_default(),
    }
}

/// What a change from `before` (none: a new payout) to `after` writes besides the row: the
/// ledger entries, the event of a new status, the sync job.
fn around(
    before: Option<&payout::Model>,
    after: &payout::Model,
    next_sync: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    db: DbBackend,
) -> Result<Change, DbErr> {
    let account = ledger::store::Account {
        merchant_id: &after.merchant_id,
        profile_id: &after.profile_id,
        test_mode: after.test_mode,
        currency: &after.currency,
    };
    let was_reserved = before.is_some_and(|b| b.reserved);
    let status = after.status;
    let mut change = Change::at(now);
    let moves = match (was_reserved, after.reserved) {
        (false, true) => {
            change = change.and(ledger::store::reserve(&account, after.amount, now, db));
            book::reserve_moves(after.amount)
        }
        (true, false) if status == Status::Success => book::paid_moves(after.amount),
        (true, false) => book::release_moves(after.amount),
        _ if status == Status::Reversed && before.is_some_and(|b| b.status == Status::Success) => {
            book::reversal_moves(after.amount)
        }
        _ => Vec::new(),
    };
    for w in ledger::store::writes(&account, &moves, &after.id, now) {
        change = change.write(w);
    }
    if before.is_none_or(|b| b.status != after.status) {
        if let Some(e) = status.event() {
            change = change.event(event(after, e));
        }
    }
    // A new payout has no job to cancel.
    let mut cancel = Vec::new();
    match machine::expire(status) {
        Some(_) => {
            change = change.job(Job::ScheduleIfAbsent {
                kind: EXPIRY_JOB,
                entity_id: after.id.to_string(),
                at: machine::expires_at(after.created_at),
            })
        }
        None => cancel.push(EXPIRY_JOB),
    }
    match next_sync {
        Some(at) => {
            change = change.job(Job::Schedule {
                kind: SYNC_JOB,
                entity_id: after.id.to_string(),
                at,
            })
        }
        None => cancel.push(SYNC_JOB),
    }
    if before.is_some() && !cancel.is_empty() {
        change = change.job(Job::Cancel {
            kinds: cancel,
            entity_id: after.id.to_string(),
        });
    }
    Ok(change)
}

/// A new payout (reserved already when created confirmed).
pub async fn insert(db: &Db, m: &payout::Model) -> Result<usize, CommitError> {
    // One sent to the processor at once is asked again if its answer is not committed.
    let sent = m.status == Status::Initiated;
    let change = Change::at(m.created_at)
        .write(commit::insert(m.clone()))
        .and(around(
            None,
            m,
            sent.then(|| machine::ask_again_at(m.created_at)),
            m.created_at,
            db.get_database_backend(),
        )?);
    Ok(commit::commit(db, change).await?.deliveries)
}

/// Replaces the row if nobody wrote since `before`; returns the row and the deliveries
/// queued.
pub async fn commit(
    db: &Db,
    before: &payout::Model,
    mut after: payout::Model,
    next_sync: Option<DateTime<Utc>>,
) -> Result<(payout::Model, usize), CommitError> {
    after.version = before.version + 1;
    let now = after.updated_at;
    let change = Change::at(now)
        .write(Write::Cas(
            payout::Entity::update_many()
                .set(after.clone().into_active_model().reset_all())
                .filter(payout::Column::Id.eq(before.id.as_str()))
                .filter(payout::Column::Version.eq(before.version))
                .into_query(),
        ))
        .and(around(
            Some(before),
            &after,
            next_sync,
            now,
            db.get_database_backend(),
        )?);
    let committed = commit::commit(db, change).await?;
    Ok((after, committed.deliveries))
}

pub async fn find(
    db: &impl ConnectionTrait,
    id: &crate::ids::PayoutId,
) -> Result<Option<payout::Model>, DbErr> {
    payout::Entity::find_by_id(id.clone()).one(db).await
}

pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: Option<&str>,
    f: &ListPayoutsQuery,
    page: &Page,
) -> Result<List<payout::Model>, PageError> {
    let mut q = payout::Entity::find()
        .filter(payout::Column::MerchantId.eq(merchant_id))
        .filter(payout::Column::TestMode.eq(test_mode));
    if let Some(p) = profile_id {
        q = q.filter(payout::Column::ProfileId.eq(p));
    }
    let visible = q.clone();
    if let Some(s) = &f.status {
        q = q.filter(payout::Column::Status.eq(s.as_str()));
    }
    if let Some(c) = &f.currency {
        q = q.filter(payout::Column::Currency.eq(c.to_ascii_uppercase()));
    }
    if let Some(a) = f.amount_gte {
        q = q.filter(payout::Column::Amount.gte(a));
    }
    if let Some(a) = f.amount_lte {
        q = q.filter(payout::Column::Amount.lte(a));
    }
    q = created_between(
        q,
        payout::Column::CreatedAt,
        f.created_after,
        f.created_before,
    );
    paginate(db, visible, q, payout::Column::Id, page).await
}
