//! The dispatcher: claims due deliveries with a lease (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL) and hands them to their merchants' delivery actors. A commit that records an
//! event wakes it at once; polling is the safety net.

use payd_model::webhooks::DeliveryStatus;
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
    sea_query::{
        Alias, Expr, ExprTrait, LockBehavior, LockType, Query, SelectStatement, UnionType,
    },
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QuerySelect,
    Statement,
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
    /// The last merchant a claim beside a full queue served (see `due`).
    served: std::sync::Mutex<Option<String>>,
    /// The full queues' merchants when a look beside them last found nothing due (see `due`);
    /// forgotten at each poll, as retries and leases come due with time.
    idle: std::sync::Mutex<Option<Vec<String>>>,
    /// Held through a claim and its hand-over to the queues, so that `settle` never looks at
    /// the queues between the two.
    claiming: tokio::sync::Mutex<()>,
}

/// A delivery no instance holds: never leased, or its lease ran out.
fn free(now: DateTime<Utc>) -> sea_orm::sea_query::Expr {
    delivery::Column::LeaseUntil
        .is_null()
        .or(delivery::Column::LeaseUntil.lt(now))
}

/// The rows of `E` with these ids, by id: one read. When a row does not decode (logged where
/// it was read, `a stored value does not decode`), each is read alone and the ones that do not
/// decode are left out: a hand-edited row holds back only its own deliveries (skipped, they
/// wait for their lease and are skipped again), never the batch's other merchants'.
async fn rows_by_id<E: EntityTrait>(
    db: &Db,
    id: E::Column,
    ids: Vec<String>,
    id_of: impl Fn(&E::Model) -> String,
) -> Result<HashMap<String, E::Model>, DbErr> {
    let rows = match E::find().filter(id.is_in(ids.clone())).all(db).await {
        Ok(rows) => rows,
        Err(e) if !does_not_decode(&e) => return Err(e),
        Err(_) => {
            let mut rows = Vec::with_capacity(ids.len());
            for one in ids {
                match E::find().filter(id.eq(one)).one(db).await {
                    Ok(row) => rows.extend(row),
                    Err(e) if does_not_decode(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            rows
        }
    };
    Ok(rows.into_iter().map(|r| (id_of(&r), r)).collect())
}

/// A read that failed on a stored value (`payd-model`'s enums, stored JSON), not on the
/// database.
fn does_not_decode(e: &DbErr) -> bool {
    matches!(e, DbErr::Custom(_) | DbErr::Type(_) | DbErr::Json(_))
}

/// The due deliveries no instance holds, oldest first; on PostgreSQL locked, skipping those
/// another instance's claim holds at this moment.
fn due_query(now: DateTime<Utc>) -> SelectStatement {
    Query::select()
        .column(delivery::Column::Id)
        .from(delivery::Entity)
        .and_where(delivery::Column::Status.eq(DeliveryStatus::Pending))
        .and_where(delivery::Column::NextAttemptAt.lte(now))
        .and_where(free(now))
        .order_by(delivery::Column::NextAttemptAt, sea_orm::Order::Asc)
        .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
        .to_owned()
}

/// The merchants with a delivery due: a walk over `idx_deliveries_merchant_due` that seeks
/// each merchant with a pending delivery once (the recursion), then checks that its oldest is
/// due. Written as one `SELECT` so it runs on the readers.
const MERCHANTS_DUE: &str = "SELECT found.id FROM (\
    WITH RECURSIVE m(id) AS (\
        SELECT (SELECT merchant_id FROM deliveries WHERE status = 'pending' \
                ORDER BY merchant_id LIMIT 1) \
        UNION ALL \
        SELECT (SELECT d.merchant_id FROM deliveries d \
                WHERE d.status = 'pending' AND d.merchant_id > m.id \
                ORDER BY d.merchant_id LIMIT 1) \
        FROM m WHERE m.id IS NOT NULL\
    ) SELECT id FROM m\
) AS found WHERE found.id IS NOT NULL AND EXISTS (\
    SELECT 1 FROM deliveries d WHERE d.status = 'pending' AND d.merchant_id = found.id \
    AND d.next_attempt_at <= $1)";

async fn merchants_due(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
) -> Result<Vec<String>, DbErr> {
    let backend = db.get_database_backend();
    let sql = match backend {
        DbBackend::Postgres => MERCHANTS_DUE.to_owned(),
        _ => MERCHANTS_DUE.replace("$1", "?"),
    };
    db.query_all_raw(Statement::from_sql_and_values(backend, sql, [now.into()]))
        .await?
        .iter()
        .map(|row| row.try_get::<String>("", "id"))
        .collect()
}

/// The merchants (with their queues' room) a claim beside a full queue serves: at most a
/// batch of them, in id order from the first after `after` (the last one the previous such
/// claim served), so that with more merchants than a batch each gets its turn.
fn take_turns(
    mut merchants: Vec<(String, u64)>,
    after: Option<&str>,
    batch: usize,
) -> Vec<(String, u64)> {
    merchants.sort();
    if let Some(last) = after {
        let at = merchants.partition_point(|(m, _)| m.as_str() <= last);
        merchants.rotate_left(at);
    }
    merchants.truncate(batch);
    merchants
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
            served: std::sync::Mutex::new(None),
            idle: std::sync::Mutex::new(None),
            claiming: tokio::sync::Mutex::new(()),
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
    /// The database the dispatcher and its deliveries write through (on PostgreSQL a pool of
    /// its own).
    pub fn db(&self) -> &Db {
        &self.db
    }

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
        let (fresh, retries): (Vec<_>, Vec<_>) = retries.into_iter().partition(|r| {
            r.delivery.status == DeliveryStatus::Pending && r.delivery.attempts == 0
        });
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

    /// Claims what is due and waits until every merchant's queue here has sent and recorded
    /// all it holds, until a claim finds nothing: what this instance would have sent by the
    /// clock's now has been sent. Returns how many deliveries it claimed. For tests, which
    /// then assert what was not sent without waiting a fixed time for it.
    pub async fn settle(&self) -> Result<usize, DbErr> {
        let mut claimed = 0;
        // Bounded: each round sends what was due; retries come due only as the clock moves.
        for _ in 0..100 {
            let n = self.tick().await?;
            self.pool.settled().await;
            claimed += n;
            if n == 0 {
                break;
            }
        }
        Ok(claimed)
    }

    /// Claims what is due and queues it; returns how many deliveries were handed over.
    pub async fn tick(&self) -> Result<usize, DbErr> {
        let _claiming = self.claiming.lock().await;
        let now = self.clock.base();
        self.measure_backlog(now).await?;
        let Some(due) = self.due(now).await? else {
            return Ok(0);
        };
        let token = new_id("lease");
        let lease_until = now + Duration::seconds(self.settings.lease_secs as i64);
        // The claimed rows come back from the UPDATE itself (`RETURNING`): looking them up by
        // lease token afterwards would scan every delivery ever made (no index on the token).
        let mut claimed = delivery::Entity::update_many()
            .col_expr(delivery::Column::LeaseOwner, Expr::value(token.clone()))
            .col_expr(delivery::Column::LeaseUntil, Expr::value(lease_until))
            .filter(delivery::Column::Id.in_subquery(due))
            .filter(free(now))
            .exec_with_returning(&self.db)
            .await?;
        claimed.sort_by_key(|d| d.next_attempt_at);
        if claimed.is_empty() {
            return Ok(0);
        }
        let events = rows_by_id::<event::Entity>(
            &self.db,
            event::Column::Id,
            claimed.iter().map(|d| d.event_id.clone()).collect(),
            |e| e.id.to_string(),
        )
        .await?;
        let endpoints = rows_by_id::<webhook_endpoint::Entity>(
            &self.db,
            webhook_endpoint::Column::Id,
            claimed.iter().map(|d| d.endpoint_id.clone()).collect(),
            |e| e.id.clone(),
        )
        .await?;
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
                .entry(d.merchant_id.to_string())
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

    /// What to claim: the oldest due deliveries, while no merchant's queue is full. Once one
    /// is, each other merchant with a delivery due gets its oldest, up to its queue's room: the
    /// oldest-first walk would pass every due delivery of the full queue on every claim (a
    /// whole backlog, for an endpoint that answers slowly), where this costs an index seek per
    /// merchant with deliveries pending (`idx_deliveries_merchant_due`), and nothing at all
    /// when the last look found nothing and nothing was recorded since. `None`: nothing to
    /// claim.
    async fn due(&self, now: DateTime<Utc>) -> Result<Option<SelectStatement>, DbErr> {
        let batch = self.settings.batch_size;
        let saturated = self.pool.saturated();
        if saturated.is_empty() {
            return Ok(Some(due_query(now).limit(batch).to_owned()));
        }
        // Taken before looking: a ring during the look is kept for the next tick.
        let news = self.wake.take_news();
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if !news && idle.is_some_and(|full| full.iter().all(|m| saturated.contains(m))) {
            // Nothing was due beside these full queues when last looked, and nothing has been
            // recorded since: a look would find the same (a claim right after a full batch,
            // in a backlog of one merchant's, does not look at all).
            return Ok(None);
        }
        let merchants: Vec<(String, u64)> = merchants_due(&self.db, now)
            .await?
            .into_iter()
            .map(|m| {
                let room = self.pool.room(&m);
                (m, room)
            })
            // No room: a full queue's merchant (`saturated`).
            .filter(|(_, room)| *room > 0)
            .collect();
        *self.idle.lock().unwrap_or_else(|e| e.into_inner()) =
            merchants.is_empty().then_some(saturated);
        if merchants.is_empty() {
            return Ok(None);
        }
        let merchants = {
            let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
            let turn = take_turns(merchants, served.as_deref(), batch as usize);
            *served = turn.last().map(|(m, _)| m.clone());
            turn
        };
        let share = batch.div_ceil(merchants.len() as u64);
        let mut arms = merchants.iter().enumerate().map(|(i, (merchant, room))| {
            // Wrapped, so each arm keeps its own ORDER BY and LIMIT (SQLite allows neither on
            // an arm of a compound SELECT).
            let oldest = due_query(now)
                .and_where(delivery::Column::MerchantId.eq(merchant.as_str()))
                .limit(Ord::min(share, *room))
                .to_owned();
            Query::select()
                .column(delivery::Column::Id)
                .from_subquery(oldest, Alias::new(format!("m{i}")))
                .to_owned()
        });
        let Some(mut due) = arms.next() else {
            return Ok(None);
        };
        due.unions(arms.map(|arm| (UnionType::All, arm)));
        Ok(Some(due))
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
            .filter(delivery::Column::Status.eq(DeliveryStatus::Pending))
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
            if tokio::time::timeout(poll, self.wake.rung()).await.is_err() {
                *self.idle.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, DbBackend, EntityTrait, Statement};

    use super::*;

    fn pending(id: &str, merchant: &str, due: DateTime<Utc>) -> delivery::ActiveModel {
        delivery::Model {
            id: id.to_owned(),
            event_id: format!("evt_{id}"),
            merchant_id: merchant.to_owned(),
            endpoint_id: format!("whep_{merchant}"),
            status: DeliveryStatus::Pending,
            attempts: 0,
            transient_failures: 0,
            auth_failures: 0,
            next_attempt_at: due,
            lease_owner: None,
            lease_until: None,
            last_status_code: None,
            last_error: None,
            delivered_at: None,
            created_at: due,
        }
        .into()
    }

    async fn plan(db: &impl ConnectionTrait, stmt: Statement) -> Vec<String> {
        db.query_all_raw(Statement {
            sql: format!("EXPLAIN QUERY PLAN {}", stmt.sql),
            ..stmt
        })
        .await
        .unwrap()
        .iter()
        .map(|r| r.try_get::<String>("", "detail").unwrap())
        .collect()
    }

    /// Beside a full queue with a long backlog, the merchants with a delivery due are found by
    /// one index seek each, and each one's oldest by its own range of the index: neither
    /// statement walks the full queue's backlog (as the oldest-first claim excluding it did).
    #[tokio::test]
    async fn merchants_due_beside_a_full_queue_are_found_without_walking_its_backlog() {
        let db = crate::webhooks::record::tests::scratch_db().await;
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let mut rows: Vec<_> = (0..500)
            .map(|i| pending(&format!("dlv_full_{i:03}"), "mer_full", now))
            .collect();
        rows.push(pending("dlv_b", "mer_b", now));
        rows.push(pending("dlv_c", "mer_c", now - Duration::seconds(5)));
        rows.push(pending(
            "dlv_later",
            "mer_later",
            now + Duration::seconds(60),
        ));
        delivery::Entity::insert_many(rows).exec(&db).await.unwrap();

        let mut found = merchants_due(&db, now).await.unwrap();
        found.sort();
        assert_eq!(
            found,
            ["mer_b", "mer_c", "mer_full"],
            "not mer_later: not due"
        );

        let discovery = Statement::from_sql_and_values(
            DbBackend::Sqlite,
            MERCHANTS_DUE.replace("$1", "?"),
            [now.into()],
        );
        let arm = DbBackend::Sqlite.build(
            &due_query(now)
                .and_where(delivery::Column::MerchantId.eq("mer_b"))
                .limit(50)
                .to_owned(),
        );
        for stmt in [discovery, arm] {
            let plan = plan(&db, stmt).await;
            let searches: Vec<_> = plan.iter().filter(|d| d.contains("deliveries")).collect();
            assert!(
                !searches.is_empty()
                    && searches.iter().all(|d| d
                        .contains("idx_deliveries_merchant_due (status=? AND merchant_id")
                        || d.ends_with("idx_deliveries_merchant_due (status=?)")),
                "{plan:?}"
            );
        }
    }

    /// With more merchants than a batch, each claim beside a full queue starts after the
    /// merchant the last one served last, and wraps around.
    #[test]
    fn merchants_beside_a_full_queue_take_turns() {
        let merchants = |ids: &[&str]| -> Vec<(String, u64)> {
            ids.iter().map(|m| (m.to_string(), 1)).collect()
        };
        let names = |turn: Vec<(String, u64)>| turn.into_iter().map(|(m, _)| m).collect::<Vec<_>>();
        let all = merchants(&["mer_d", "mer_a", "mer_c", "mer_b", "mer_e"]);
        assert_eq!(names(take_turns(all.clone(), None, 2)), ["mer_a", "mer_b"]);
        assert_eq!(
            names(take_turns(all.clone(), Some("mer_b"), 2)),
            ["mer_c", "mer_d"]
        );
        assert_eq!(
            names(take_turns(all.clone(), Some("mer_d"), 2)),
            ["mer_e", "mer_a"]
        );
        // The last one served has nothing due any more: the next after it still comes first.
        assert_eq!(
            names(take_turns(merchants(&["mer_a", "mer_e"]), Some("mer_c"), 2)),
            ["mer_e", "mer_a"]
        );
        assert_eq!(names(take_turns(all, Some("mer_e"), 9)).len(), 5);
    }
}
