//! Retention: the scheduled purge (`webhooks.purge_interval_secs`) deletes delivery attempts
//! older than `webhooks.attempt_retention_secs` and replaces event payloads older than
//! `webhooks.payload_retention_secs` with a tombstone (`null`, and `purged_at`): the event
//! stays listed. A payload whose delivery is still pending or paused is kept until that
//! delivery ends. Work goes in batches, each its own statement, within a time budget per run;
//! what is left waits for the next run. The same run sweeps for endpoints to disable.

use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Duration, Utc};
use payd_entity::{delivery, delivery_attempt, event};
use sea_orm::{
    sea_query::{Expr, Query},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter,
};

use crate::{commit::Db, settings::WebhookSettings};

/// The scheduled job of the purge (one for the deployment, rescheduled by each run).
pub const PURGE_JOB: &str = "webhook_purge";

/// Rows one statement purges.
const BATCH: u64 = 1000;

/// How long one run may purge; the rest is left to the next.
const BUDGET: StdDuration = StdDuration::from_secs(10);

/// The payload of a purged event.
pub const TOMBSTONE: &str = "null";

/// What one run removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    pub attempts: u64,
    pub payloads: u64,
    /// Endpoints the sweep disabled.
    pub disabled: usize,
}

fn secs(s: u64) -> Duration {
    Duration::seconds(s as i64)
}

/// One run of the purge and the sweep.
pub async fn run(db: &Db, settings: &WebhookSettings, now: DateTime<Utc>) -> Result<Purged, DbErr> {
    let started = Instant::now();
    let attempts = in_batches(started, || {
        purge_attempts(db, now - secs(settings.attempt_retention_secs))
    })
    .await?;
    let payloads = in_batches(started, || {
        purge_payloads(db, now - secs(settings.payload_retention_secs), now)
    })
    .await?;
    metrics::counter!("payd_webhook_purged_rows_total", "kind" => "attempt").increment(attempts);
    metrics::counter!("payd_webhook_purged_rows_total", "kind" => "payload").increment(payloads);
    let disabled = super::health::sweep(db, secs(settings.disable_after_secs), now).await?;
    if attempts + payloads > 0 {
        tracing::info!(attempts, payloads, "webhook retention purge");
    }
    Ok(Purged {
        attempts,
        payloads,
        disabled,
    })
}

/// Runs `batch` until it purges less than a whole batch or the run's budget is spent.
async fn in_batches<F, Fut>(started: Instant, mut batch: F) -> Result<u64, DbErr>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64, DbErr>>,
{
    let mut total = 0;
    loop {
        let n = batch().await?;
        total += n;
        if n < BATCH || started.elapsed() >= BUDGET {
            return Ok(total);
        }
    }
}

/// Deletes up to a batch of attempts made before `before`.
async fn purge_attempts(db: &impl ConnectionTrait, before: DateTime<Utc>) -> Result<u64, DbErr> {
    let old = Query::select()
        .column(delivery_attempt::Column::Id)
        .from(delivery_attempt::Entity)
        .and_where(delivery_attempt::Column::CreatedAt.lt(before))
        .limit(BATCH)
        .to_owned();
    let res = delivery_attempt::Entity::delete_many()
        .filter(delivery_attempt::Column::Id.in_subquery(old))
        .exec(db)
        .await?;
    Ok(res.rows_affected)
}

/// Replaces up to a batch of payloads of events recorded before `before` with the tombstone,
/// skipping events with a delivery still pending or paused.
async fn purge_payloads(
    db: &impl ConnectionTrait,
    before: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let waiting = Query::select()
        .column(delivery::Column::EventId)
        .from(delivery::Entity)
        .and_where(delivery::Column::Status.is_in(["pending", "paused"]))
        .to_owned();
    let old = Query::select()
        .column(event::Column::Id)
        .from(event::Entity)
        .and_where(event::Column::CreatedAt.lt(before))
        .and_where(event::Column::PurgedAt.is_null())
        .and_where(event::Column::Id.not_in_subquery(waiting))
        .limit(BATCH)
        .to_owned();
    let res = event::Entity::update_many()
        .col_expr(event::Column::Payload, Expr::value(TOMBSTONE))
        .col_expr(event::Column::PurgedAt, Expr::value(Some(now)))
        .filter(event::Column::Id.in_subquery(old))
        .exec(db)
        .await?;
    Ok(res.rows_affected)
}
