//! Sending: the per-merchant delivery actors that hold each merchant's queue, bound its
//! requests in flight (each one attempt, `super::attempt`) and record every outcome. A dead
//! or slow endpoint fills only its own merchant's queue.

use payd_model::webhooks::DeliveryStatus;
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
    sea_query::{Expr, ExprTrait, LockType, Query},
    ColumnTrait, Condition, EntityTrait, PaginatorTrait, QueryFilter, QueryTrait,
};
use tokio::sync::oneshot;

use super::{
    attempt::{attempt, attempt_row, delivery_client, Outcome},
    health, policy,
    record::{self, without_lease, Finished},
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
                .col_expr(
                    delivery::Column::Status,
                    Expr::value(DeliveryStatus::Paused),
                )
                .filter(ours())
                .filter(delivery::Column::Status.eq(DeliveryStatus::Pending))
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
    let next = (d.status == DeliveryStatus::Pending && !delivered).then_some(d.next_attempt_at);
    let row = attempt_row(
        d,
        number,
        payd_model::webhooks::AttemptTrigger::Manual,
        outcome,
        next,
        now,
    );
    let mut change = Change::at(now).write(Write::Insert(
        delivery_attempt::Entity::insert(row).into_query(),
    ));
    if delivered {
        change = change.write(Write::Update(
            delivery::Entity::update_many()
                .col_expr(
                    delivery::Column::Status,
                    Expr::value(DeliveryStatus::Delivered),
                )
                .col_expr(delivery::Column::DeliveredAt, Expr::value(Some(now)))
                .filter(delivery::Column::Id.eq(d.id.as_str()))
                .filter(delivery::Column::Status.ne(DeliveryStatus::Delivered))
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
    Ok(delivered && d.status != DeliveryStatus::Delivered)
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
    /// Requests open now per endpoint id, each at most `max_in_flight_per_endpoint` (an
    /// endpoint that hangs holds back only its own work); an endpoint with none is absent.
    in_flight_to: HashMap<String, usize>,
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
    /// Told (`Settled`) once nothing is queued, in flight or waiting to be written.
    settle_waiters: Vec<oneshot::Sender<()>>,
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
            in_flight_to: HashMap::new(),
            backlog,
            unwritten: Vec::new(),
            writing: false,
            draining: None,
            next_slot: HashMap::new(),
            waiting_for_slot: false,
            settle_waiters: Vec::new(),
        })
    }
}

impl MerchantDeliveries {
    /// The first queued work whose endpoint may be sent to at `now` (below its in-flight
    /// bound, its rate's slot open), taking its slot; or, if none may, how long until the
    /// first rate slot opens (`None`: every endpoint with work waits for a request to end).
    fn next_work(&mut self, now: Instant) -> Result<Work, Option<StdDuration>> {
        let mut wait: Option<StdDuration> = None;
        let bound = self.deps.settings.max_in_flight_per_endpoint;
        let ready = self.queue.iter().position(|w| {
            let id = &w.endpoint().id;
            if self.in_flight_to.get(id).is_some_and(|n| *n >= bound) {
                return false;
            }
            let opens = self.next_slot.get(id).copied();
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
        loop {
            let work = match self.next_work(Instant::now()) {
                Ok(work) => work,
                Err(wait) => {
                    // Everything queued waits for its endpoint's rate or for one of its
                    // requests to end: pumped again when the first slot opens, or when a
                    // request ends.
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
            let endpoint = work.endpoint().id.clone();
            *self.in_flight_to.entry(endpoint.clone()).or_default() += 1;
            let deps = self.deps.clone();
            let timeout = StdDuration::from_secs(deps.settings.request_timeout_secs);
            let client = delivery_client(timeout, &deps.outbound);
            let item = match work {
                Work::Claimed(item) => item,
                Work::Manual(retry) => {
                    ctx.spawn(
                        async move { send_manual(&deps, &client, retry).await }
                            .into_actor(self)
                            .map(move |(), act, ctx| {
                                act.manual -= 1;
                                act.ended(&endpoint);
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
                    .map(move |sent, act, ctx| {
                        match sent {
                            Some(finished) => {
                                act.unwritten.push(finished);
                                act.flush(ctx);
                            }
                            // Not ours any more: nothing to write.
                            None => act.release(1),
                        }
                        act.ended(&endpoint);
                        act.deps.count_in_flight(-1);
                        act.pump(ctx);
                        act.tell_if_drained();
                    }),
            );
        }
    }

    /// A request to `endpoint` has ended.
    fn ended(&mut self, endpoint: &str) {
        if let Some(n) = self.in_flight_to.get_mut(endpoint) {
            *n -= 1;
            if *n == 0 {
                self.in_flight_to.remove(endpoint);
            }
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
                match record::write(&deps.db, &batch).await {
                    Ok(()) => {
                        let after = Duration::seconds(deps.settings.disable_after_secs as i64);
                        record::disable_failing(&deps.db, after, deps.clock.base(), &batch).await
                    }
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

    /// Answers `Drain` once nothing is in flight or waiting to be written, and `Settled` once
    /// nothing is queued either.
    fn tell_if_drained(&mut self) {
        if !self.in_flight_to.is_empty() || self.writing || !self.unwritten.is_empty() {
            return;
        }
        if self.queue.is_empty() {
            for waiter in self.settle_waiters.drain(..) {
                let _ = waiter.send(());
            }
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
            self.deps.wake.freed();
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

/// Answered once the queue has sent and recorded everything it holds (`Dispatcher::settle`).
#[derive(Message, Clone)]
#[rtype(result = "()")]
struct Settled;

impl Handler<Settled> for MerchantDeliveries {
    type Result = actix::ResponseFuture<()>;

    fn handle(&mut self, _: Settled, _: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        self.settle_waiters.push(tx);
        self.tell_if_drained();
        Box::pin(async move {
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
            .filter(delivery::Column::Status.eq(DeliveryStatus::Pending))
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
        DeliveryStatus::Pending => "retrying",
        status => status.as_str(),
    };
    metrics::counter!("payd_webhook_deliveries_total", "outcome" => label).increment(1);
    Some(finished)
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

    /// Waits until every merchant's queue has sent and recorded all it holds.
    pub async fn settled(&self) {
        let ids = self.actors.ids();
        futures_util::future::join_all(ids.iter().map(|id| self.actors.send(id, Settled))).await;
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

    /// How many more deliveries the merchant's queue takes before it is saturated.
    pub fn room(&self, merchant_id: &str) -> u64 {
        let limit = backlog_limit(&self.actors.deps().settings);
        let backlog = self
            .actors
            .deps()
            .backlogs
            .get(merchant_id)
            .map_or(0, |b| b.load(Ordering::Relaxed));
        Ord::max(limit - backlog, 0) as u64
    }
}
