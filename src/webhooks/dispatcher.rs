//! The dispatcher: claims due deliveries with a lease (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL) and hands them to their merchants' delivery actors. A commit that records an
//! event wakes it at once; polling is the safety net.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration as StdDuration, Instant},
};

use chrono::{DateTime, Duration, Utc};
use payd_entity::{delivery, event, webhook_endpoint};
use sea_orm::{
    sea_query::{Expr, ExprTrait, LockBehavior, LockType, Query},
    ColumnTrait, DbErr, EntityTrait, QueryFilter, QuerySelect,
};

use super::delivery::{park, Claimed, DeliveryPool, MerchantDeliveries};
use crate::commit::Db;
use crate::{clock::SharedClock, ids::new_id, settings::WebhookSettings, wake::Wake};

/// Makes every webhook series exist at 0 from start-up (adding 0 changes no value that another
/// instance in the same process recorded), so dashboards and alerts read 0, not "no data".
fn register_metrics() {
    metrics::gauge!("payd_webhook_queue_depth").increment(0.0);
    metrics::gauge!("payd_webhook_in_flight").increment(0.0);
    metrics::gauge!("payd_webhook_oldest_pending_seconds").increment(0.0);
    for outcome in ["delivered", "retrying", "failed"] {
        metrics::counter!("payd_webhook_deliveries_total", "outcome" => outcome).increment(0);
    }
    let _ = metrics::histogram!("payd_webhook_attempt_seconds");
    metrics::gauge!("payd_webhook_endpoints_disabled").increment(0.0);
    metrics::gauge!("payd_webhook_endpoints_failing").increment(0.0);
    for kind in ["attempt", "payload"] {
        metrics::counter!("payd_webhook_purged_rows_total", "kind" => kind).increment(0);
    }
}

pub struct Dispatcher {
    db: Db,
    clock: SharedClock,
    settings: Arc<WebhookSettings>,
    pool: DeliveryPool,
    wake: Wake,
    /// Set by `stop`: `run` returns after the tick under way, so no claim is cut off halfway.
    stopping: AtomicBool,
    /// When the backlog was last measured: at most once a second, not on every tick.
    measured: std::sync::Mutex<Option<Instant>>,
}

/// How often the backlog gauges are read from the database.
const MEASURE_EVERY: StdDuration = StdDuration::from_secs(1);

impl Dispatcher {
    pub fn new(
        db: Db,
        clock: SharedClock,
        settings: Arc<WebhookSettings>,
        pool: DeliveryPool,
        wake: Wake,
    ) -> Self {
        register_metrics();
        Self {
            db,
            clock,
            settings,
            pool,
            wake,
            stopping: AtomicBool::new(false),
            measured: std::sync::Mutex::new(None),
        }
    }

    /// For shutdown: `run` returns after the tick under way.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.wake.now();
    }

    /// For shutdown, after `run` has returned: see `DeliveryPool::drain`.
    pub async fn drain(&self) {
        // The requests in flight, and a moment to write their outcomes.
        let within = StdDuration::from_secs(self.settings.request_timeout_secs + 5);
        self.pool.drain(within).await;
    }

    /// The merchants' delivery actors.
    pub fn deliveries(&self) -> &payd_actors::Registry<MerchantDeliveries> {
        self.pool.actors()
    }

    /// Queues manual retries with the merchant's delivery actor (see `DeliveryPool::retry`).
    /// A delivery never attempted (one a retry made for an event recorded before its shop had
    /// an endpoint, or one about to go) is not sent by hand as well: it is due now, and this
    /// dispatcher is woken to send it once, as its initial attempt.
    pub async fn retry(
        &self,
        merchant_id: &str,
        retries: Vec<super::delivery::ManualRetry>,
    ) -> Result<bool, crate::error::ApiError> {
        let (fresh, retries): (Vec<_>, Vec<_>) = retries
            .into_iter()
            .partition(|r| r.delivery.status == "pending" && r.delivery.attempts == 0);
        if !fresh.is_empty() {
            self.wake();
        }
        if retries.is_empty() {
            return Ok(true);
        }
        self.pool.retry(merchant_id, retries).await
    }

    /// Looks for due work now (after a commit that recorded events).
    pub fn wake(&self) {
        self.wake.now();
    }

    /// Claims what is due and queues it; returns how many deliveries were handed over.
    pub async fn tick(&self) -> Result<usize, DbErr> {
        let now = self.clock.base();
        self.measure_backlog(now).await?;
        let token = new_id("lease");
        let lease_until = now + Duration::seconds(self.settings.lease_secs as i64);
        let free = delivery::Column::LeaseUntil
            .is_null()
            .or(delivery::Column::LeaseUntil.lt(now));
        let mut due = Query::select()
            .column(delivery::Column::Id)
            .from(delivery::Entity)
            .and_where(delivery::Column::Status.eq("pending"))
            .and_where(delivery::Column::NextAttemptAt.lte(now))
            .and_where(free.clone())
            .order_by(delivery::Column::NextAttemptAt, sea_orm::Order::Asc)
            .limit(self.settings.batch_size)
            .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
            .to_owned();
        let saturated = self.pool.saturated();
        if !saturated.is_empty() {
            due.and_where(delivery::Column::MerchantId.is_not_in(saturated));
        }
        // The claimed rows come back from the UPDATE itself (`RETURNING`): looking them up by
        // lease token afterwards would scan every delivery ever made (no index on the token).
        let mut claimed = delivery::Entity::update_many()
            .col_expr(delivery::Column::LeaseOwner, Expr::value(token.clone()))
            .col_expr(delivery::Column::LeaseUntil, Expr::value(lease_until))
            .filter(delivery::Column::Id.in_subquery(due))
            .filter(free)
            .exec_with_returning(&self.db)
            .await?;
        claimed.sort_by_key(|d| d.next_attempt_at);
        if claimed.is_empty() {
            return Ok(0);
        }
        let events: HashMap<String, event::Model> = event::Entity::find()
            .filter(event::Column::Id.is_in(claimed.iter().map(|d| d.event_id.clone())))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|e| (e.id.clone(), e))
            .collect();
        let endpoints: HashMap<String, webhook_endpoint::Model> = webhook_endpoint::Entity::find()
            .filter(
                webhook_endpoint::Column::Id.is_in(claimed.iter().map(|d| d.endpoint_id.clone())),
            )
            .all(&self.db)
            .await?
            .into_iter()
            .map(|e| (e.id.clone(), e))
            .collect();
        let count = claimed.len();
        // A paused endpoint gets nothing: what was due for it waits, parked, until it resumes.
        let (paused, claimed): (Vec<_>, Vec<_>) = claimed
            .into_iter()
            .partition(|d| endpoints.get(&d.endpoint_id).is_some_and(|e| !e.enabled));
        if !paused.is_empty() {
            if let Err(e) = park(&self.db, &paused, &token, now).await {
                // Their leases run out and they are claimed (and parked) again.
                tracing::warn!(error = %e, deliveries = paused.len(), "could not park deliveries");
            }
        }
        let claimed_at = std::time::Instant::now();
        let mut by_merchant: HashMap<String, Vec<Claimed>> = HashMap::new();
        for d in claimed {
            let (Some(event), Some(endpoint)) =
                (events.get(&d.event_id), endpoints.get(&d.endpoint_id))
            else {
                continue;
            };
            by_merchant
                .entry(d.merchant_id.clone())
                .or_default()
                .push(Claimed {
                    event: event.clone(),
                    endpoint: endpoint.clone(),
                    lease: token.clone(),
                    claimed_at,
                    delivery: d,
                });
        }
        for (merchant, items) in by_merchant {
            self.pool.enqueue(&merchant, items).await;
        }
        Ok(count)
    }

    /// The backlog, at most once a second: the deliveries not yet delivered or given up
    /// (due, being sent, or waiting for their next retry), how long the oldest has waited
    /// since its event, and the endpoints' health gauges.
    async fn measure_backlog(&self, now: DateTime<Utc>) -> Result<(), DbErr> {
        {
            let mut measured = self.measured.lock().unwrap_or_else(|e| e.into_inner());
            if measured.is_some_and(|at| at.elapsed() < MEASURE_EVERY) {
                return Ok(());
            }
            *measured = Some(Instant::now());
        }
        let (count, oldest): (i64, Option<DateTime<Utc>>) = delivery::Entity::find()
            .select_only()
            .column_as(delivery::Column::Id.count(), "count")
            .column_as(delivery::Column::CreatedAt.min(), "oldest")
            .filter(delivery::Column::Status.eq("pending"))
            .into_tuple()
            .one(&self.db)
            .await?
            .unwrap_or((0, None));
        let age = oldest.map_or(0, |t| Ord::max((now - t).num_milliseconds(), 0));
        metrics::gauge!("payd_webhook_queue_depth").set(count as f64);
        metrics::gauge!("payd_webhook_oldest_pending_seconds").set(age as f64 / 1000.0);
        super::health::measure(&self.db, now).await
    }

    /// Runs until `stop` (or until the task is dropped).
    pub async fn run(self: Arc<Self>) {
        let poll = StdDuration::from_millis(self.settings.poll_interval_ms);
        while !self.stopping.load(Ordering::Relaxed) {
            match self.tick().await {
                // A full batch: more may be due at once.
                Ok(n) if n as u64 >= self.settings.batch_size => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "webhook dispatch failed"),
            }
            let _ = tokio::time::timeout(poll, self.wake.rung()).await;
        }
    }
}
