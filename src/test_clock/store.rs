//! A merchant's test clock in the database: its offset, its jobs' due times, and the one
//! change that moves both. The jobs' merchant tag has no index (it would cost every job write
//! on the payment path), so these queries read the job table: an advance is a sandbox tool.

use chrono::{DateTime, Utc};
use payd_entity::{merchant, scheduled_job};
use sea_orm::{
    sea_query::Query, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};

use crate::commit::Db;
use crate::commit::{self, Change, CommitError, Write};
use crate::ids::MerchantId;

/// The merchant's offset in seconds (0 for an unknown merchant).
pub async fn offset(db: &impl ConnectionTrait, merchant_id: &MerchantId) -> Result<i64, DbErr> {
    Ok(merchant::Entity::find_by_id(merchant_id.clone())
        .one(db)
        .await?
        .map_or(0, |m| m.sandbox_clock_offset))
}

/// The earliest due time (base time) of the merchant's jobs, leased ones included: a job
/// another instance is running still holds the clock back until it has run.
pub async fn next_due(
    db: &impl ConnectionTrait,
    merchant_id: &MerchantId,
) -> Result<Option<DateTime<Utc>>, DbErr> {
    Ok(scheduled_job::Entity::find()
        .filter(scheduled_job::Column::MerchantId.eq(merchant_id.as_str()))
        .order_by_asc(scheduled_job::Column::DueAt)
        .limit(1)
        .one(db)
        .await?
        .map(|j| j.due_at))
}

/// Whether one of the merchant's jobs is running now (held under an unexpired lease): the
/// clock does not move past a job's handler while it runs.
pub async fn running(
    db: &impl ConnectionTrait,
    merchant_id: &MerchantId,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    Ok(scheduled_job::Entity::find()
        .filter(scheduled_job::Column::MerchantId.eq(merchant_id.as_str()))
        .filter(scheduled_job::Column::LeaseUntil.gt(now))
        .one(db)
        .await?
        .is_some())
}

/// Moves the merchant's clock from `from` seconds ahead to `from + by`, and each of its jobs
/// `by` seconds earlier in base time (the same due time on its clock), in one change. Another
/// advance that moved the clock first makes it a lost race.
pub async fn shift(
    db: &Db,
    now: DateTime<Utc>,
    merchant_id: &MerchantId,
    from: i64,
    by: i64,
) -> Result<(), CommitError> {
    let jobs = scheduled_job::Entity::find()
        .filter(scheduled_job::Column::MerchantId.eq(merchant_id.as_str()))
        .all(db)
        .await?;
    // The offset is read with the merchant's keys, which instances cache.
    let mut change = Change::at(now)
        .write(Write::Cas(
            Query::update()
                .table(merchant::Entity)
                .value(merchant::Column::SandboxClockOffset, from + by)
                .and_where(merchant::Column::Id.eq(merchant_id.as_str()))
                .and_where(merchant::Column::SandboxClockOffset.eq(from))
                .to_owned(),
        ))
        .write(crate::lookups::bump());
    for job in jobs {
        // A job rescheduled meanwhile was scheduled on the clock as it then read: left alone.
        change = change.write(Write::Update(
            Query::update()
                .table(scheduled_job::Entity)
                .value(
                    scheduled_job::Column::DueAt,
                    job.due_at - chrono::Duration::seconds(by),
                )
                .and_where(scheduled_job::Column::Id.eq(job.id))
                .and_where(scheduled_job::Column::DueAt.eq(job.due_at))
                .to_owned(),
        ));
    }
    commit::commit(db, change).await?;
    Ok(())
}
