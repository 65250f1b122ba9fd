//! Sending: the per-merchant delivery actors that hold each merchant's queue, bound its
//! requests in flight (each one attempt, `super::attempt`) and record every outcome. A dead
//! or slow endpoint fills only its own merchant's queue.

use std::{
    collections::{HashMap, VecDeque},
    future::Future,
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc,
    },
    time::{Duration as StdDuration, Instant},
};

use actix::{Actor, ActorFutureExt, AsyncContext, Context, Handler, Message, WrapFuture};
use chrono::{DateTime, Duration, Utc};
use dashmap::DashMap;
use payd_actors::{ArbiterPool, KeyedActor, Registry, RegistryConfig};
use payd_entity::{delivery, delivery_attempt, event, webhook_endpoint};
use rand::Rng;
use sea_orm::{
    sea_query::{
        Alias, Expr, ExprTrait, Func, IntoIden, LockType, Query, TableRef, UpdateStatement,
        ValueTuple,
    },
    ColumnTrait, Condition, EntityTrait, PaginatorTrait, QueryFilter, QueryTrait, UpdateMany,
};
use tokio::sync::oneshot;

use super::{
    attempt::{attempt, attempt_row, delivery_client, Outcome},
    health,
    policy::{self, Answer},
};
use crate::commit::Db;
use crate::{
    clock::SharedClock,
    commit::{self, Change, CommitError, Write},
    error::ApiError,
    outbound::Policy,
    sealed::Keyring,
    settings::WebhookSettings,
};

/// A claimed delivery with what sending it needs.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub delivery: delivery::Model,
    pub event: event::Model,
    pub endpoint: webhook_endpoint::Model,
    /// The lease token the dispatcher claimed it with.
    pub lease: String,
    /// When the dispatcher claimed it (real time: how long it waited in the queue).
    pub claimed_at: Instant,
}

pub use super::store::ManualRetry;

/// Parks claimed deliveries whose endpoint the claim found paused: each becomes `paused` if
/// its endpoint still is, and its lease is let go. The endpoint is read under a share lock, so
/// a resume committing meanwhile either waits for this (and then resumes what it parked) or is
/// seen by it (and nothing is parked).
pub async fn park(
    db: &Db,
    items: &[delivery::Model],
    lease: &str,
    now: DateTime<Utc>,
) -> Result<(), CommitError> {
    let still_paused = Query::select()
        .column(webhook_endpoint::Column::Id)
        .from(webhook_endpoint::Entity)
        .and_where(webhook_endpoint::Column::Id.is_in(items.iter().map(|d| d.endpoint_id.as_str())))
        .and_where(webhook_endpoint::Column::Enabled.eq(false))
        .lock(LockType::Share)
        .to_owned();
    let ours = || {
        Condition::all()
            .add(delivery::Column::Id.is_in(items.iter().map(|d| d.id.as_str())))
            .add(delivery::Column::LeaseOwner.eq(lease))
    };
    let change = Change::at(now)
        .write(Write::Update(
            delivery::Entity::update_many()
                .col_expr(delivery::Column::Status, Expr::value("paused"))
                .filter(ours())
                .filter(delivery::Column::Status.eq("pending"))
                .filter(delivery::Column::EndpointId.in_subquery(still_paused))
                .into_query(),
        ))
        .write(Write::Update(
            without_lease(delivery::Entity::update_many())
                .filter(ours())
                .into_query(),
        ));
    commit::commit(db, change).await.map(drop)
}

/// Sends a manual retry and records it; a success marks the delivery delivered. The automatic
/// schedule is left as it is.
async fn send_manual(deps: &DeliveryDeps, client: &awc::Client, retry: ManualRetry) {
    wait_turn(deps, &retry.endpoint).await;
    let timeout = StdDuration::from_secs(deps.settings.request_timeout_secs);
    let outcome = attempt(
        client,
        &retry.endpoint,
        &retry.event,
        deps.clock.base(),
        timeout,
        &deps.keyring,
    )
    .await;
    match record_manual(deps, &retry, &outcome, deps.clock.base()).await {
        // A manual retry only counts when it delivered what was not delivered yet.
        Ok(true) => {
            metrics::counter!("payd_webhook_deliveries_total", "outcome" => "delivered")
                .increment(1);
        }
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(error = %e, delivery = %retry.delivery.id, "could not record a manual attempt");
        }
    }
}

/// Records a manual attempt (and what it tells of its endpoint's health); answers whether it
/// delivered a delivery not delivered before.
async fn record_manual(
    deps: &DeliveryDeps,
    retry: &ManualRetry,
    outcome: &Outcome,
    now: DateTime<Utc>,
) -> Result<bool, CommitError> {
    let (db, d) = (&deps.db, &retry.delivery);
    let number = delivery_attempt::Entity::find()
        .filter(delivery_attempt::Column::DeliveryId.eq(d.id.as_str()))
        .count(db)
        .await? as i32
        + 1;
    let delivered = policy::classify(outcome.answer) == policy::Class::Delivered;
    // Once delivered, nothing is due any more; otherwise the automatic schedule stands.
    let next = (d.status == "pending" && !delivered).then_some(d.next_attempt_at);
    let row = attempt_row(d, number, "manual", outcome, next, now);
    let mut change = Change::at(now).write(Write::Insert(
        delivery_attempt::Entity::insert(row).into_query(),
    ));
    if delivered {
        change = change.write(Write::Update(
            delivery::Entity::update_many()
                .col_expr(delivery::Column::Status, Expr::value("delivered"))
                .col_expr(delivery::Column::DeliveredAt, Expr::value(Some(now)))
                .filter(delivery::Column::Id.eq(d.id.as_str()))
                .filter(delivery::Column::Status.ne("delivered"))
                .into_query(),
        ));
    }
    let answered = health::Answered {
        endpoint_id: &retry.endpoint.id,
        at: now,
        delivered,
    };
    for w in health::streak_writes(&[answered]) {
        change = change.write(w);
    }
    commit::commit(db, change).await?;
    let after = Duration::seconds(deps.settings.disable_after_secs as i64);
    if !delivered && health::may_be_due(&retry.endpoint, after, now) {
        health::disable_if_failing(db, &retry.endpoint, after, now).await?;
    }
    Ok(delivered && d.status != "delivered")
}

/// What the delivery actors share.
#[derive(Clone)]
pub struct DeliveryDeps {
    pub db: Db,
    pub clock: SharedClock,
    pub settings: Arc<WebhookSettings>,
    /// Deliveries claimed by this instance, queued or being sent, across all merchants (the
    /// `payd_webhook_in_flight` gauge).
    pub depth: Arc<AtomicI64>,
    /// Wakes the dispatcher when a full queue drains below its limit, so the merchant's
    /// waiting deliveries are claimed at once rather than at the next poll.
    pub wake: crate::wake::Wake,
    /// Each merchant's backlog (queued, in flight, or sent with the outcome not yet
    /// written), so the dispatcher can skip merchants whose queue is full.
    pub backlogs: Arc<DashMap<String, Arc<AtomicI64>>>,
    /// Which addresses deliveries may reach.
    pub outbound: Arc<Policy>,
    /// Opens the endpoints' sealed signing secrets.
    pub keyring: Arc<Keyring>,
}

impl DeliveryDeps {
    /// Adds `change` to the deliveries this instance holds, and shows the sum.
    fn count_in_flight(&self, change: i64) {
        let now = self.depth.fetch_add(change, Ordering::Relaxed) + change;
        metrics::gauge!("payd_webhook_in_flight").set(now as f64);
    }
}

/// See [`WebhookSettings::backlog_limit`].
fn backlog_limit(settings: &WebhookSettings) -> i64 {
    settings.backlog_limit() as i64
}

#[derive(Message, Clone)]
#[rtype(result = "()")]
struct Enqueue(Vec<Claimed>);

/// Manual retries for the merchant's queue; `false` when it already holds as many as it
/// takes.
#[derive(Message, Clone)]
#[rtype(result = "bool")]
struct Retry(Vec<ManualRetry>);

/// What a merchant's queue holds.
enum Work {
    /// Claimed by the dispatcher, under a lease.
    Claimed(Claimed),
    /// Asked for through the API: sent once, recorded, never rescheduled.
    Manual(ManualRetry),
}

impl Work {
    fn endpoint(&self) -> &webhook_endpoint::Model {
        match self {
            Work::Claimed(c) => &c.endpoint,
            Work::Manual(r) => &r.endpoint,
        }
    }
}

/// The time between two requests to an endpoint limited to `max_per_second`.
fn spacing(endpoint: &webhook_endpoint::Model) -> Option<StdDuration> {
    let rate = endpoint.max_per_second.filter(|r| *r > 0)?;
    Some(StdDuration::from_secs(1) / rate as u32)
}

/// One merchant's queue: an actor of the registry, keyed by merchant id.
pub struct MerchantDeliveries {
    deps: DeliveryDeps,
    queue: VecDeque<Work>,
    /// Manual retries queued or in flight.
    manual: usize,
    in_flight: usize,
    /// Queued, in flight, or sent with the outcome not yet written; shared with the pool so
    /// the dispatcher can see a backlog. Counting unwritten outcomes bounds them: a merchant
    /// whose writes lag gets no new claims until they catch up.
    backlog: Arc<AtomicI64>,
    /// Sent, outcome not yet written; written together while the previous write runs.
    unwritten: Vec<Finished>,
    writing: bool,
    /// Set by `Drain`: nothing more is sent, and these are told once nothing is in flight or
    /// unwritten.
    draining: Option<Vec<oneshot::Sender<()>>>,
    /// When each rate-limited endpoint may next be sent to (`max_per_second`).
    next_slot: HashMap<String, Instant>,
    /// A pump is scheduled for when the next slot opens.
    waiting_for_slot: bool,
}

impl Actor for MerchantDeliveries {
    type Context = Context<Self>;
}

impl KeyedActor for MerchantDeliveries {
    const KIND: &'static str = "webhook";
    type Deps = DeliveryDeps;
    type LoadError = std::convert::Infallible;

    async fn load(merchant_id: &str, deps: &DeliveryDeps) -> Result<Self, Self::LoadError> {
        // A fresh count: an actor that died took its queue with it (those leases run out and
        // are claimed again), and one passivated had nothing left.
        let backlog = Arc::new(AtomicI64::new(0));
        deps.backlogs
            .insert(merchant_id.to_owned(), backlog.clone());
        Ok(Self {
            deps: deps.clone(),
            queue: VecDeque::new(),
            manual: 0,
            in_flight: 0,
            backlog,
            unwritten: Vec::new(),
            writing: false,
            draining: None,
            next_slot: HashMap::new(),
            waiting_for_slot: false,
        })
    }
}

impl MerchantDeliveries {
    /// The first queued work whose endpoint may be sent to at `now`, taking its slot; or, if
    /// every queued work waits for its endpoint's rate, how long until the first slot opens.
    fn next_work(&mut self, now: Instant) -> Result<Work, Option<StdDuration>> {
        let mut wait: Option<StdDuration> = None;
        let ready = self.queue.iter().position(|w| {
            let opens = self.next_slot.get(&w.endpoint().id).copied();
            match opens.filter(|at| *at > now) {
                Some(at) => {
                    let left = at - now;
                    wait = Some(wait.map_or(left, |w| w.min(left)));
                    false
                }
                None => true,
            }
        });
        let work = ready.and_then(|i| self.queue.remove(i)).ok_or(wait)?;
        let endpoint = work.endpoint();
        match spacing(endpoint) {
            Some(gap) => {
                self.next_slot.insert(endpoint.id.clone(), now + gap);
            }
            None => {
                self.next_slot.remove(&endpoint.id);
            }
        }
        Ok(work)
    }

    fn pump(&mut self, ctx: &mut Context<Self>) {
        while self.in_flight < self.deps.settings.max_in_flight_per_endpoint {
            let work = match self.next_work(Instant::now()) {
                Ok(work) => work,
                Err(wait) => {
                    // Everything queued waits for its endpoint's rate: pumped again when the
                    // first slot opens.
                    if let Some(wait) = wait.filter(|_| !self.waiting_for_slot) {
                        self.waiting_for_slot = true;
                        ctx.run_later(wait, |act, ctx| {
                            act.waiting_for_slot = false;
                            act.pump(ctx);
                        });
                    }
                    break;
                }
            };
            self.in_flight += 1;
            let deps = self.deps.clone();
            let timeout = StdDuration::from_secs(deps.settings.request_timeout_secs);
            let client = delivery_client(timeout, &deps.outbound);
            let item = match work {
                Work::Claimed(item) => item,
                Work::Manual(retry) => {
                    ctx.spawn(
                        async move { send_manual(&deps, &client, retry).await }
                            .into_actor(self)
                            .map(|(), act, ctx| {
                                act.manual -= 1;
                                act.in_flight -= 1;
                                act.pump(ctx);
                                act.tell_if_drained();
                            }),
                    );
                    continue;
                }
            };
            ctx.spawn(
                async move { send(&deps, &client, item).await }
                    .into_actor(self)
                    .map(|sent, act, ctx| {
                        match sent {
                            Some(finished) => {
                                act.unwritten.push(finished);
                                act.flush(ctx);
                            }
                            // Not ours any more: nothing to write.
                            None => act.release(1),
                        }
                        act.in_flight -= 1;
                        act.deps.count_in_flight(-1);
                        act.pump(ctx);
                        act.tell_if_drained();
                    }),
            );
        }
    }

    /// Starts writing what was sent, unless a write is running (its end starts the next one).
    fn flush(&mut self, ctx: &mut Context<Self>) {
        if self.writing || self.unwritten.is_empty() {
            return;
        }
        self.writing = true;
        let rest = self
            .unwritten
            .split_off(self.unwritten.len().min(WRITE_BATCH));
        let batch = std::mem::replace(&mut self.unwritten, rest);
        let written = batch.len();
        let deps = self.deps.clone();
        ctx.spawn(
            async move {
                match write(&deps.db, &batch).await {
                    Ok(()) => disable_failing(&deps, &batch).await,
                    Err(e) => tracing::warn!(error = %e, deliveries = batch.len(),
                        "could not record delivery attempts"),
                }
            }
            .into_actor(self)
            .map(move |_, act, ctx| {
                act.writing = false;
                act.release(written);
                act.flush(ctx);
                act.tell_if_drained();
            }),
        );
    }

    /// Gives claimed deliveries that will not be sent here back to the database (their leases
    /// released), so any instance claims them at once instead of when the leases run out.
    fn hand_back(&mut self, items: Vec<Claimed>) -> impl Future<Output = ()> + 'static {
        let n = items.len();
        self.deps.count_in_flight(-(n as i64));
        self.release(n);
        let db = self.deps.db.clone();
        async move {
            if items.is_empty() {
                return;
            }
            // Each row only under the lease it was claimed with.
            let ours = items.iter().fold(Condition::any(), |any, c| {
                any.add(
                    delivery::Column::Id
                        .eq(c.delivery.id.as_str())
                        .and(delivery::Column::LeaseOwner.eq(c.lease.as_str())),
                )
            });
            let released = without_lease(delivery::Entity::update_many())
                .filter(ours)
                .exec(&db)
                .await;
            if let Err(e) = released {
                // Their leases run out instead.
                tracing::warn!(error = %e, deliveries = n, "could not hand deliveries back");
            }
        }
    }

    /// Answers `Drain` once nothing is in flight or waiting to be written.
    fn tell_if_drained(&mut self) {
        if self.in_flight > 0 || self.writing || !self.unwritten.is_empty() {
            return;
        }
        for waiter in self.draining.iter_mut().flat_map(|w| w.drain(..)) {
            let _ = waiter.send(());
        }
    }

    /// Takes `n` deliveries off the backlog; the dispatcher is woken when that brings the
    /// merchant below its limit (it skipped the merchant's deliveries meanwhile).
    fn release(&self, n: usize) {
        let n = n as i64;
        let before = self.backlog.fetch_sub(n, Ordering::Relaxed);
        let limit = backlog_limit(&self.deps.settings);
        if before >= limit && before - n < limit {
            self.deps.wake.now();
        }
    }
}

impl Handler<Enqueue> for MerchantDeliveries {
    type Result = ();

    fn handle(&mut self, msg: Enqueue, ctx: &mut Context<Self>) {
        let n = msg.0.len() as i64;
        self.backlog.fetch_add(n, Ordering::Relaxed);
        self.deps.count_in_flight(n);
        if self.draining.is_some() {
            let handed_back = self.hand_back(msg.0);
            ctx.spawn(handed_back.into_actor(self));
            return;
        }
        self.queue.extend(msg.0.into_iter().map(Work::Claimed));
        self.pump(ctx);
    }
}

impl Handler<Retry> for MerchantDeliveries {
    type Result = bool;

    fn handle(&mut self, msg: Retry, ctx: &mut Context<Self>) -> bool {
        if self.draining.is_some()
            || self.manual + msg.0.len() > backlog_limit(&self.deps.settings) as usize
        {
            return false;
        }
        self.manual += msg.0.len();
        // Ahead of the automatic work: someone is waiting to see it arrive.
        for retry in msg.0.into_iter().rev() {
            self.queue.push_front(Work::Manual(retry));
        }
        self.pump(ctx);
        true
    }
}

/// Stops a merchant's deliveries for shutdown: what is queued is handed back at once, and the
/// answer comes when what was in flight has been answered and its outcome written.
#[derive(Message, Clone)]
#[rtype(result = "()")]
struct Drain;

impl Handler<Drain> for MerchantDeliveries {
    type Result = actix::ResponseFuture<()>;

    fn handle(&mut self, _: Drain, _: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        self.draining.get_or_insert_with(Vec::new).push(tx);
        // Claimed work goes back to the database; manual retries not yet sent are dropped
        // (the delivery's automatic schedule stands).
        let mut queued = Vec::new();
        for work in self.queue.drain(..) {
            match work {
                Work::Claimed(item) => queued.push(item),
                Work::Manual(_) => self.manual -= 1,
            }
        }
        let handed_back = self.hand_back(queued);
        self.tell_if_drained();
        Box::pin(async move {
            handed_back.await;
            let _ = rx.await;
        })
    }
}

/// A lease with less than this left past the request timeout is renewed before sending.
const LEASE_MARGIN_SECS: i64 = 5;

/// A claimed delivery that waited longer than this in its merchant's queue is checked again
/// before it is sent (its endpoint may have been paused meanwhile).
const QUEUE_RECHECK: StdDuration = StdDuration::from_secs(1);

/// The most attempts written in one transaction.
const WRITE_BATCH: usize = 200;

/// A sent delivery whose outcome is still to be written.
struct Finished {
    delivery: delivery::Model,
    /// As claimed: its health as it stood then.
    endpoint: webhook_endpoint::Model,
    lease: String,
    outcome: Outcome,
    next: policy::Next,
    at: DateTime<Utc>,
}

impl Finished {
    fn status(&self) -> &'static str {
        match (self.next.delivered, self.next.retry_at) {
            (true, _) => "delivered",
            (false, Some(_)) => "pending",
            (false, None) => "failed",
        }
    }
}

/// One `UPDATE` for a batch's deliveries, joined by id to a `VALUES` list of their new states
/// (`UPDATE … FROM (VALUES …)`, on both databases). A row is only written under its own lease
/// token and while still `pending` or `paused` (a manual retry may have delivered it meanwhile:
/// that stands); an attempt under way when its endpoint was paused is recorded, and the
/// delivery stays paused unless the attempt ended it. Each row is found by its primary key,
/// whatever the backlog: a `WHERE id IN (…)` with `CASE` per column led SQLite to walk every
/// pending delivery through `idx_deliveries_due` instead, on every batch.
fn outcomes(batch: &[Finished]) -> UpdateStatement {
    let rows = batch
        .iter()
        .map(|f| {
            let ended = match f.status() {
                "pending" => None,
                ended => Some(ended.to_owned()),
            };
            ValueTuple::Many(vec![
                f.delivery.id.clone().into(),
                f.lease.clone().into(),
                ended.into(),
                (f.delivery.attempts + 1).into(),
                f.next.transient_failures.into(),
                f.next.auth_failures.into(),
                f.next.retry_at.unwrap_or(f.delivery.next_attempt_at).into(),
                match f.outcome.answer {
                    Answer::Status { code, .. } => Some(i32::from(code)),
                    _ => None,
                }
                .into(),
                policy::error_kind(f.outcome.answer)
                    .map(str::to_owned)
                    .into(),
                f.next.delivered.then_some(f.at).into(),
            ])
        })
        .collect();
    // A `VALUES` list's columns are `column1`, `column2`, … on both databases.
    let new = |n: usize| Expr::col((Alias::new("new"), Alias::new(format!("column{n}"))));
    let old = |c: delivery::Column| Expr::col((delivery::Entity, c));
    without_lease(delivery::Entity::update_many())
        .col_expr(
            delivery::Column::Status,
            Func::coalesce([new(3), old(delivery::Column::Status)]).into(),
        )
        .col_expr(delivery::Column::Attempts, new(4))
        .col_expr(delivery::Column::TransientFailures, new(5))
        .col_expr(delivery::Column::AuthFailures, new(6))
        .col_expr(delivery::Column::NextAttemptAt, new(7))
        .col_expr(delivery::Column::LastStatusCode, new(8))
        .col_expr(delivery::Column::LastError, new(9))
        .col_expr(delivery::Column::DeliveredAt, new(10))
        .filter(old(delivery::Column::Id).eq(new(1)))
        .filter(old(delivery::Column::LeaseOwner).eq(new(2)))
        .filter(delivery::Column::Status.is_in(["pending", "paused"]))
        .into_query()
        .from(TableRef::ValuesList(rows, Alias::new("new").into_iden()))
        .to_owned()
}

/// Waits for the endpoint's turn under its `max_per_second`, taken in the database so that
/// every instance sending to it keeps to the one rate together.
async fn wait_turn(deps: &DeliveryDeps, endpoint: &webhook_endpoint::Model) {
    let Some(gap) = spacing(endpoint).and_then(|g| Duration::from_std(g).ok()) else {
        return;
    };
    match super::store::take_turn(&deps.db, &endpoint.id, gap).await {
        Ok(Some(turn)) => {
            if let Ok(wait) = (turn - crate::clock::wall_now()).to_std() {
                tokio::time::sleep(wait).await;
            }
        }
        // Contended past a few tries: this instance's own spacing still holds.
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(error = %e, endpoint = %endpoint.id, "could not take a turn to send")
        }
    }
}

/// Sends one claimed delivery if the lease is still ours; `None` if it is not.
async fn send(deps: &DeliveryDeps, client: &awc::Client, item: Claimed) -> Option<Finished> {
    wait_turn(deps, &item.endpoint).await;
    let now = deps.clock.base();
    let timeout_secs = deps.settings.request_timeout_secs as i64;
    // Invariant: only the holder of the lease sends, and the lease outlasts the request, so no
    // other dispatcher can claim it mid-request. A claim's lease usually has that time left;
    // one short of it, or that waited in the queue longer than `QUEUE_RECHECK`, is renewed
    // first. The renewal needs the delivery still `pending`: an endpoint paused meanwhile
    // gets nothing.
    let needed = now + Duration::seconds(timeout_secs + LEASE_MARGIN_SECS);
    if item.claimed_at.elapsed() > QUEUE_RECHECK
        || item.delivery.lease_until.is_none_or(|until| until < needed)
    {
        let lease_until = now + Duration::seconds(deps.settings.lease_secs as i64 + timeout_secs);
        let renewed = delivery::Entity::update_many()
            .col_expr(delivery::Column::LeaseUntil, Expr::value(lease_until))
            .filter(delivery::Column::Id.eq(item.delivery.id.as_str()))
            .filter(delivery::Column::LeaseOwner.eq(item.lease.as_str()))
            .filter(delivery::Column::Status.eq("pending"))
            .exec(&deps.db)
            .await;
        if !matches!(renewed, Ok(r) if r.rows_affected == 1) {
            // Paused (or no longer ours): let go of the lease if it still is ours, so a
            // resumed endpoint's delivery is claimed at once.
            let released = without_lease(delivery::Entity::update_many())
                .filter(delivery::Column::Id.eq(item.delivery.id.as_str()))
                .filter(delivery::Column::LeaseOwner.eq(item.lease.as_str()))
                .exec(&deps.db)
                .await;
            if let Err(e) = released {
                tracing::warn!(error = %e, delivery = %item.delivery.id, "could not release a lease");
            }
            return None;
        }
    }
    let timeout = StdDuration::from_secs(deps.settings.request_timeout_secs);
    let outcome = attempt(
        client,
        &item.endpoint,
        &item.event,
        now,
        timeout,
        &deps.keyring,
    )
    .await;
    let at = deps.clock.base();
    let d = &item.delivery;
    let jitter = if deps.settings.jitter {
        rand::rng().random_range(-0.1..=0.1)
    } else {
        0.0
    };
    let next = policy::after_attempt(
        outcome.answer,
        d.transient_failures,
        d.auth_failures,
        &deps.settings.transient_retry_schedule,
        &deps.settings.auth_retry_schedule,
        at,
        jitter,
    );
    let finished = Finished {
        delivery: item.delivery,
        endpoint: item.endpoint,
        lease: item.lease,
        outcome,
        next,
        at,
    };
    let label = match finished.status() {
        "pending" => "retrying",
        status => status,
    };
    metrics::counter!("payd_webhook_deliveries_total", "outcome" => label).increment(1);
    Some(finished)
}

/// Writes sent deliveries' attempts and new states in one transaction. If it fails, their
/// leases run out and they are sent again: at least once, never lost.
async fn write(db: &Db, batch: &[Finished]) -> Result<(), CommitError> {
    let rows = batch.iter().map(|f| {
        let d = &f.delivery;
        let trigger = if d.attempts == 0 {
            "initial"
        } else {
            "automatic"
        };
        attempt_row(
            d,
            d.attempts + 1,
            trigger,
            &f.outcome,
            f.next.retry_at,
            f.at,
        )
    });
    let attempts = rows.map(commit::append);
    let deliveries = outcomes(batch);
    let at = batch.iter().map(|f| f.at).max().unwrap_or_default();
    // The endpoints' rows first, then their deliveries: the order in which pausing, resuming
    // and parking lock them too, so that these writers never wait on each other in a cycle.
    let mut change = Change::at(at);
    for w in health::streak_writes(&to_record(batch)) {
        change = change.write(w);
    }
    let change = attempts.fold(change, Change::write);
    commit::commit(db, change.write(Write::Update(deliveries)))
        .await
        .map(drop)
}

/// The batch's attempts as their endpoints' health counts them.
fn answered(batch: &[Finished]) -> Vec<health::Answered<'_>> {
    batch
        .iter()
        .map(|f| health::Answered {
            endpoint_id: &f.endpoint.id,
            at: f.at,
            delivered: f.next.delivered,
        })
        .collect()
}

/// The batch's attempts whose endpoints' health they change (see [`health::unchanged`]),
/// judged once per endpoint on its claimed copy.
fn to_record(batch: &[Finished]) -> Vec<health::Answered<'_>> {
    let all = answered(batch);
    let mut judged: HashMap<&str, bool> = HashMap::new();
    batch
        .iter()
        .zip(&all)
        .filter(|(f, a)| {
            *judged.entry(a.endpoint_id).or_insert_with(|| {
                let mine: Vec<_> = all
                    .iter()
                    .filter(|x| x.endpoint_id == a.endpoint_id)
                    .copied()
                    .collect();
                !health::unchanged(&f.endpoint, &mine)
            })
        })
        .map(|(_, a)| *a)
        .collect()
}

/// After a batch is written: disables the endpoints it left failing for longer than
/// `webhooks.disable_after_secs` (judged first on the claimed copies, so a healthy batch costs
/// no statement).
async fn disable_failing(deps: &DeliveryDeps, batch: &[Finished]) {
    let after = Duration::seconds(deps.settings.disable_after_secs as i64);
    let now = deps.clock.base();
    let failing = health::left_failing(&answered(batch));
    let mut checked: Vec<&str> = Vec::new();
    for f in batch {
        let id = f.endpoint.id.as_str();
        if !failing.contains(&id) || checked.contains(&id) {
            continue;
        }
        checked.push(id);
        if health::may_be_due(&f.endpoint, after, now) {
            if let Err(e) = health::disable_if_failing(&deps.db, &f.endpoint, after, now).await {
                tracing::warn!(error = %e, endpoint = id, "could not disable a failing endpoint");
            }
        }
    }
}

/// The update also releases the rows' leases.
fn without_lease(update: UpdateMany<delivery::Entity>) -> UpdateMany<delivery::Entity> {
    update
        .col_expr(
            delivery::Column::LeaseOwner,
            Expr::value(Option::<String>::None),
        )
        .col_expr(
            delivery::Column::LeaseUntil,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
}

/// The delivery actors, one per merchant, in the actor registry like every other kind
/// (activation, mailbox bound, respawn, passivation, metrics).
pub struct DeliveryPool {
    actors: Registry<MerchantDeliveries>,
}

impl DeliveryPool {
    pub fn new(deps: DeliveryDeps, config: RegistryConfig, arbiters: Arc<ArbiterPool>) -> Self {
        Self {
            actors: Registry::new(deps, config, arbiters),
        }
    }

    /// The registry, for its sweeper and shutdown.
    pub fn actors(&self) -> &Registry<MerchantDeliveries> {
        &self.actors
    }

    /// Hands claimed deliveries to their merchant's actor.
    pub async fn enqueue(&self, merchant_id: &str, items: Vec<Claimed>) {
        if let Err(e) = self.actors.send(merchant_id, Enqueue(items)).await {
            // Overloaded or dead twice: the leases run out and the dispatcher claims them again.
            tracing::warn!(error = %e, merchant = merchant_id, "delivery actor unavailable");
        }
    }

    /// For shutdown: every merchant's queued deliveries are handed back, and this returns
    /// once what was in flight has been answered and written, or after `within`. What is still
    /// in flight then is sent again when its lease runs out (at least once).
    pub async fn drain(&self, within: StdDuration) {
        let ids = self.actors.ids();
        let all = futures_util::future::join_all(ids.iter().map(|id| self.actors.send(id, Drain)));
        if tokio::time::timeout(within, all).await.is_err() {
            tracing::warn!("webhook deliveries still in flight at shutdown");
        }
    }

    /// Queues manual retries with their merchant's actor; `false` when its queue of them is
    /// full.
    pub async fn retry(
        &self,
        merchant_id: &str,
        retries: Vec<ManualRetry>,
    ) -> Result<bool, ApiError> {
        self.actors
            .send(merchant_id, Retry(retries))
            .await
            .map_err(|e| match e {
                payd_actors::ActorError::Overloaded => ApiError::overloaded(),
                other => ApiError::internal(format!("delivery actor: {other}")),
            })
    }

    /// Merchants whose queue already holds enough work: the dispatcher claims none for them,
    /// so one dead endpoint cannot take every claim.
    pub fn saturated(&self) -> Vec<String> {
        let limit = backlog_limit(&self.actors.deps().settings);
        self.actors
            .deps()
            .backlogs
            .iter()
            .filter(|e| e.value().load(Ordering::Relaxed) >= limit)
            .map(|e| e.key().clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, DbBackend, EntityTrait, Statement};

    use super::*;

    fn claimed(id: &str, status: &str, lease: &str, now: DateTime<Utc>) -> delivery::Model {
        delivery::Model {
            id: id.to_owned(),
            event_id: format!("evt_{id}"),
            merchant_id: "mer_1".into(),
            endpoint_id: "whep_1".into(),
            status: status.to_owned(),
            attempts: 1,
            transient_failures: 1,
            auth_failures: 0,
            next_attempt_at: now,
            lease_owner: Some(lease.to_owned()),
            lease_until: Some(now + Duration::seconds(60)),
            last_status_code: None,
            last_error: None,
            delivered_at: None,
            created_at: now,
        }
    }

    fn finished(delivery: delivery::Model, code: u16, at: DateTime<Utc>) -> Finished {
        let answer = Answer::Status {
            code,
            retry_after: None,
        };
        let endpoint = webhook_endpoint::Model {
            id: "whep_1".into(),
            merchant_id: "mer_1".into(),
            profile_id: "prof_1".into(),
            url: "https://shop.example/hooks".into(),
            secret: String::new(),
            previous_secret: None,
            previous_secret_expires_at: None,
            enabled: true,
            created_at: at,
            updated_at: at,
            consecutive_failures: 0,
            failing_since: None,
            last_success_at: None,
            disabled_reason: None,
            max_per_second: None,
            next_send_at: None,
            test_mode: true,
        };
        let next = policy::after_attempt(answer, 1, 0, &[5, 300], &[5], at, 0.0);
        Finished {
            lease: "lease_a".into(),
            delivery,
            endpoint,
            outcome: Outcome {
                answer,
                request_headers: Vec::new(),
                response_body: None,
                duration_ms: 1,
            },
            next,
            at,
        }
    }

    /// A batch's outcomes are found by primary key, not by walking the backlog through
    /// `idx_deliveries_due` (which SQLite chose for `WHERE id IN (…)` with a `CASE` per
    /// column), and each row gets its own values: delivered, retried, a paused one left
    /// paused, and one whose lease another sender holds left alone.
    #[tokio::test]
    async fn a_batch_of_outcomes_finds_each_row_by_key_and_writes_its_own() {
        let url = "sqlite::memory:";
        let db = crate::db::connect(url, Some(1)).await.unwrap();
        crate::db::migrate(url, &db).await.unwrap();
        db.execute_unprepared("PRAGMA foreign_keys = OFF")
            .await
            .unwrap();
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let mut rows: Vec<_> = (0..40)
            .map(|i| claimed(&format!("dlv_{i:02}"), "pending", "lease_a", now))
            .collect();
        rows.push(claimed("dlv_paused", "paused", "lease_a", now));
        rows.push(claimed("dlv_theirs", "pending", "lease_b", now));
        let active: Vec<delivery::ActiveModel> = rows.iter().cloned().map(Into::into).collect();
        delivery::Entity::insert_many(active)
            .exec(&db)
            .await
            .unwrap();

        let at = now + Duration::seconds(1);
        let batch: Vec<Finished> = rows
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let retry = i % 2 == 1 || d.status == "paused";
                finished(d.clone(), if retry { 503 } else { 200 }, at)
            })
            .collect();
        let built = DbBackend::Sqlite.build(&outcomes(&batch));

        let plan = db
            .query_all_raw(Statement {
                sql: format!("EXPLAIN QUERY PLAN {}", built.sql),
                ..built.clone()
            })
            .await
            .unwrap();
        let plan: Vec<String> = plan
            .iter()
            .map(|r| r.try_get::<String>("", "detail").unwrap())
            .collect();
        assert!(
            plan.iter()
                .any(|d| d
                    .starts_with("SEARCH deliveries USING INDEX sqlite_autoindex_deliveries_1")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|d| d.contains("idx_deliveries_due")),
            "{plan:?}"
        );

        let written = db.execute_raw(built).await.unwrap();
        assert_eq!(
            written.rows_affected(),
            41,
            "all but the row under another lease"
        );
        let after: HashMap<String, delivery::Model> = delivery::Entity::find()
            .all(&db)
            .await
            .unwrap()
            .into_iter()
            .map(|d| (d.id.clone(), d))
            .collect();
        let delivered = &after["dlv_00"];
        assert_eq!(delivered.status, "delivered");
        assert_eq!(delivered.attempts, 2);
        assert_eq!(delivered.last_status_code, Some(200));
        assert_eq!(delivered.delivered_at, Some(at));
        assert_eq!(delivered.lease_owner, None);
        let retried = &after["dlv_01"];
        assert_eq!(retried.status, "pending");
        assert_eq!(retried.attempts, 2);
        assert_eq!(retried.transient_failures, 2);
        assert_eq!(retried.last_status_code, Some(503));
        assert_eq!(retried.next_attempt_at, at + Duration::seconds(300));
        assert_eq!(retried.delivered_at, None);
        assert_eq!(retried.lease_until, None);
        // A retry: it stays paused.
        assert_eq!(after["dlv_paused"].status, "paused");
        assert_eq!(after["dlv_paused"].attempts, 2);
        let theirs = &after["dlv_theirs"];
        assert_eq!(theirs.attempts, 1);
        assert_eq!(theirs.lease_owner.as_deref(), Some("lease_b"));
    }
}
