//! The payment actor: one per payment id. It serializes every write to its payment — confirm,
//! capture, cancel, update, sync, expiry, challenge — asking the machine, calling the
//! processor, and committing the result with a compare-and-set on the row's version.

mod authorize;
mod capture;
mod refunding;
mod sync;

use authorize::*;
pub use authorize::{challenge, first_account};
use capture::*;
use payd_model::payments::Trigger;
use refunding::*;
use sync::*;

use std::{cell::RefCell, rc::Rc, sync::Arc, time::Duration as StdDuration};

use actix::{
    Actor, ActorFutureExt, AsyncContext, AtomicResponse, Context, Handler, Message, WrapFuture,
};
use chrono::{DateTime, Duration, Utc};
use dashmap::DashMap;
use payd_actors::KeyedActor;
use payd_entity::{mandate, payment, payment_attempt, processor_account, refund};
use sea_orm::DbErr;

pub use super::commands::{same_secret, Access, Command, Done, Patch, PaymentError};
use super::rows::{
    answered, apply_patch, attempt_row, card_of, event_for, last_error, op_key, processor_of,
    refund_event,
};
use super::{
    api::{lines_of, CardReader, Payment, RoutingDecision},
    intent::Intent,
    machine::{self, Authorization, CancelKind, CaptureMethod, ProcessorView, Status},
    processor_accounts, refunds,
    routing::{self, Facts},
    store::{self, Announcement, Changes, SaveCard},
};
use crate::auth::keys::Caller;
use crate::commit::Db;
use crate::lookups::Cache;
use crate::{
    clock::{self, SharedClock, Timeline},
    commit,
    customers::{self, api::check_mandate},
    disputes,
    fields::Metadata,
    ids::PaymentId,
    money::Money,
    processors::{
        connect::{self, Connections},
        sandbox::Sandbox,
        AppliedRefund, AuthRequest, AuthResult, Challenge, Processor, ProcessorError, RefundResult,
        RefundStatus, SaveFor, SecretCard, StoredCard,
    },
    recovery::RequestKey,
    settings::Settings,
    wake::Wake,
};

/// What the payment actors need.
#[derive(Clone)]
pub struct PaymentDeps {
    pub db: Db,
    pub clock: SharedClock,
    pub settings: Arc<Settings>,
    pub sandbox: Arc<Sandbox>,
    /// The base of `checkout_url` in the payment object (events carry the same object).
    pub public_url: String,
    pub wake: Wake,
    /// The processors behind the shops' accounts.
    pub connections: Arc<Connections>,
    /// The shops' processor accounts in creation order and their routing rules, cached.
    pub routing: Cache<(Vec<processor_account::Model>, routing::RoutingRules)>,
    /// Rows a handler has just made and is about to send a command for: the actor takes its
    /// first state from here instead of reading the row back, and the row's insert when it is
    /// not yet written (a create with `confirm: true`: see [`exec_created`]). The handler
    /// removes what was not taken, so nothing stays.
    pub fresh: DashMap<PaymentId, Fresh>,
    /// The test-only fault of `sandbox.fail_outcome_commits`.
    pub fail_outcomes: Arc<store::FailOutcomes>,
}

/// A row a handler has just made, for its actor's first state.
#[derive(Clone)]
pub struct Fresh {
    pub row: payment::Model,
    /// Its insert, when the command's first commit is to write it.
    pub unwritten: Option<store::Created>,
}

impl PaymentDeps {
    /// How a request of `caller` reads a card now: the caller's merchant and mode, this
    /// deployment's fingerprint key.
    pub fn cards<'a>(&'a self, caller: &'a Caller) -> CardReader<'a> {
        CardReader {
            now: self.clock.now(),
            pepper: &self.settings.security.key_pepper,
            merchant_id: caller.merchant_id.as_str(),
            test_mode: caller.test_mode(),
        }
    }

    /// The processor behind one of the shop's accounts (a shop without accounts has the
    /// implicit sandbox one).
    async fn processor_for(
        &self,
        m: &payment::Model,
        name: &str,
    ) -> Result<Arc<dyn Processor>, PaymentError> {
        // Invariant: only an account of the payment's mode serves it after routing too (a
        // capture, refund, sync or challenge), and a live one never by the sandbox.
        let account = processor_accounts::accounts(&self.db, &m.profile_id, m.test_mode)
            .await?
            .into_iter()
            .find(|a| a.name == name);
        let served = match &account {
            Some(a) => connect::serves(a, m.test_mode),
            // The implicit sandbox of a shop without test accounts.
            None => m.test_mode && name == routing::DEFAULT_PROCESSOR,
        };
        if !served {
            return Err(ProcessorError::Unavailable(
                "the payment's processor account is gone, of the other mode, or a sandbox serving a live payment".into(),
            )
            .into());
        }
        self.resolve(account.as_ref()).ok_or_else(|| {
            ProcessorError::Unavailable(
                "the processor account's configuration cannot be read".into(),
            )
            .into()
        })
    }

    fn resolve(&self, account: Option<&processor_account::Model>) -> Option<Arc<dyn Processor>> {
        self.connections.resolve(account)
    }

    fn settle_delay(&self) -> Duration {
        self.sandbox.async_delay
    }

    /// Until when a capturable payment may be captured (none for any other status).
    fn capture_before(&self, next: &machine::State, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        next.status.is_capturable().then(|| now + Duration::days(7))
    }
}

/// The registry of payment actors.
pub type Payments = payd_actors::Registry<PaymentActor>;

/// Runs a command through the payment's actor; an id that is not a payment's reads as "no
/// such payment". Handlers of every resource that moves a payment's money call this, with the
/// request's `Idempotency-Key` if it has one.
pub async fn run(
    payments: &Payments,
    id: &str,
    access: Option<Access>,
    command: Command,
    key: Option<RequestKey>,
) -> Result<Done, PaymentError> {
    let id = crate::ids::PaymentId::parse(id).ok_or(PaymentError::NotFound)?;
    let exec = Exec {
        access,
        command,
        key,
        timeline: clock::current(),
    };
    payments.send(&id, exec).await?
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<Done, PaymentError>")]
pub struct Exec {
    pub access: Option<Access>,
    pub command: Command,
    /// The `Idempotency-Key` of the request that sent the command, if any.
    pub key: Option<RequestKey>,
    /// The timeline it was sent on (see `clock`).
    pub timeline: Timeline,
}

impl Exec {
    /// A command of payd's own (a scheduled job): no caller, no key.
    pub fn own(command: Command) -> Self {
        Self {
            access: None,
            command,
            key: None,
            timeline: clock::current(),
        }
    }
}

tokio::task_local! {
    /// The `Idempotency-Key` of the request whose command is running: set around the command
    /// (not around a reconciliation run before it), read by [`commit`], which names the
    /// command's object as the key's recovery point in each of its commits.
    static REQUEST_KEY: Option<RequestKey>;

    /// The insert of a payment created with `confirm: true`, while no commit has written it:
    /// the first [`commit`] of its command takes it, so the payment and its confirm are one
    /// transaction.
    static UNWRITTEN: Rc<RefCell<Option<store::Created>>>;
}

pub struct PaymentActor {
    id: Box<str>,
    /// The stored row as last seen. Dropped `actors.row_cache_ms` after the last message, so
    /// an idle actor holds little more than its address; the next message reads it again.
    /// Boxed: the row is ~600 bytes inline, which an idle actor would otherwise keep.
    model: Option<Box<payment::Model>>,
    /// Messages handled; a cache-drop timer set by an earlier one leaves a newer row alone.
    handled: u64,
    /// The row's insert, until the first message writes it (boxed: an idle actor has none).
    unwritten: Option<Box<store::Created>>,
    /// Shared by every payment actor: one pointer each, not a copy.
    deps: Arc<PaymentDeps>,
}

impl Actor for PaymentActor {
    type Context = Context<Self>;
}

/// The payment an actor serves, read again (its id was parsed when it was loaded).
async fn reload(db: &Db, id: &str) -> Result<Option<payment::Model>, DbErr> {
    match PaymentId::parse(id) {
        Some(id) => store::find(db, &id).await,
        None => Ok(None),
    }
}

impl KeyedActor for PaymentActor {
    const KIND: &'static str = "payment";
    type Deps = Arc<PaymentDeps>;
    type LoadError = PaymentError;

    async fn load(id: &str, deps: &Arc<PaymentDeps>) -> Result<Self, PaymentError> {
        let (model, unwritten) = match deps.fresh.remove(id) {
            Some((_, fresh)) => (fresh.row, fresh.unwritten.map(Box::new)),
            None => {
                let id = PaymentId::parse(id).ok_or(PaymentError::NotFound)?;
                let found = store::find(&deps.db, &id).await?;
                (found.ok_or(PaymentError::NotFound)?, None)
            }
        };
        Ok(Self {
            id: id.into(),
            model: Some(Box::new(model)),
            handled: 0,
            unwritten,
            deps: deps.clone(),
        })
    }

    fn is_missing(error: &PaymentError) -> bool {
        matches!(error, PaymentError::NotFound)
    }
}

impl Handler<Exec> for PaymentActor {
    type Result = AtomicResponse<Self, Result<Done, PaymentError>>;

    fn handle(&mut self, msg: Exec, _: &mut Context<Self>) -> Self::Result {
        let (deps, cached, id) = (self.deps.clone(), self.model.take(), self.id.clone());
        let unwritten = self.unwritten.take();
        self.handled += 1;
        AtomicResponse::new(Box::pin(
            async move {
                let current = match cached {
                    Some(m) => *m,
                    None => match reload(&deps.db, &id).await {
                        Ok(Some(m)) => m,
                        Ok(None) => return (None, Err(PaymentError::NotFound)),
                        Err(e) => return (None, Err(e.into())),
                    },
                };
                let timeline = crate::accounts::store::timeline_for(
                    &deps.db,
                    &msg.timeline,
                    &current.merchant_id,
                    current.test_mode,
                )
                .await;
                let run = async {
                    match unwritten {
                        Some(created) => exec_created(&deps, current, msg, *created).await,
                        None => {
                            let (latest, result) = exec(&deps, current, msg).await;
                            (Some(latest), result)
                        }
                    }
                };
                let (latest, result) = clock::scoped(timeline, run).await;
                (latest.map(Box::new), result)
            }
            .into_actor(self)
            .map(|(latest, result), act, ctx| {
                // After a database error nothing cached is trusted (a commit whose answer was
                // lost may have been made): the next message reads the row.
                act.model = match &result {
                    Err(PaymentError::Db(_)) => None,
                    _ => latest,
                };
                let handled = act.handled;
                let ttl = StdDuration::from_millis(act.deps.settings.actors.row_cache_ms);
                ctx.run_later(ttl, move |act, _| {
                    if act.handled == handled {
                        act.model = None;
                    }
                });
                result
            }),
        ))
    }
}

/// Runs a command; returns the latest known row (for the actor's cache) and the answer.
async fn exec(
    deps: &PaymentDeps,
    current: payment::Model,
    msg: Exec,
) -> (payment::Model, Result<Done, PaymentError>) {
    if let Some(access) = &msg.access {
        let scope = &access.scope;
        if !scope.sees(&current.merchant_id, current.test_mode, &current.profile_id) {
            return (current, Err(PaymentError::NotFound));
        }
        if !access.shows(&current.client_secret) {
            return (current, Err(PaymentError::Forbidden));
        }
    }
    // The cache may be stale when another instance wrote: decide again on the stored row.
    commit::decide_fresh(
        current,
        async |m: &payment::Model| step(deps, m, &msg.command, &msg.key).await,
        |result, m| match result {
            Err(
                PaymentError::LostRace
                | PaymentError::Refused(_)
                | PaymentError::RefundRefused(_)
                | PaymentError::PaymentMethodRequired
                | PaymentError::MandateNotFound
                | PaymentError::Mandate(_)
                | PaymentError::CatalogLinesFixed(_)
                | PaymentError::LinesMismatch { .. }
                | PaymentError::StoredLinesMismatch { .. }
                | PaymentError::OperationPending { .. }
                | PaymentError::Internal(_),
            ) => true,
            Ok(done) => done.payment.version == m.version,
            Err(_) => false,
        },
        async |m: &payment::Model| Ok(store::find(&deps.db, &m.id).await?),
        |done: &Done| &done.payment,
        || PaymentError::NotFound,
    )
    .await
}

/// Runs the first command on a payment whose insert is not yet written (its creator's
/// confirm): its first commit writes the insert too; a command that commits nothing (a
/// refusal) leaves the insert to be written alone, so the payment exists either way, as it
/// would had it been inserted first. Nobody else knows the row yet: it is decided on as it is.
/// Returns the row for the actor's cache, none when it may not have been written.
async fn exec_created(
    deps: &PaymentDeps,
    current: payment::Model,
    msg: Exec,
    created: store::Created,
) -> (Option<payment::Model>, Result<Done, PaymentError>) {
    let unwritten = Rc::new(RefCell::new(Some(created)));
    let command = step(deps, &current, &msg.command, &msg.key);
    let result = UNWRITTEN.scope(unwritten.clone(), command).await;
    let left = unwritten.borrow_mut().take();
    let taken = left.is_none();
    if let Some(created) = left {
        if let Err(e) = store::insert(&deps.db, &current, created).await {
            return (None, Err(e.into()));
        }
    }
    match result {
        Ok(done) => (Some(done.payment.clone()), Ok(done)),
        // Had a commit taken the insert, it failed with it: the row may not exist.
        Err(e) if taken => (None, Err(e)),
        Err(e) => (Some(current), Err(e)),
    }
}

/// Runs one command: one function each, below. A payment whose processor operation has no
/// recorded outcome has it reconciled first (a sync does only that); a command meets it only
/// once it is settled.
async fn step(
    deps: &PaymentDeps,
    m: &payment::Model,
    command: &Command,
    key: &Option<RequestKey>,
) -> Result<Done, PaymentError> {
    let keyed = |m| REQUEST_KEY.scope(key.clone(), run_command(deps, m, command));
    if m.pending_operation.is_none() {
        return keyed(m).await;
    }
    // Reconcile only the intent as stored: a cached one may have been recorded meanwhile
    // (another instance), and the stored row decides again.
    let stored = store::find(&deps.db, &m.id).await?;
    if stored.is_none_or(|s| s.version != m.version) {
        return Err(PaymentError::LostRace);
    }
    let reconciled = reconcile(deps, m).await;
    if matches!(command, Command::Sync) {
        return reconciled;
    }
    let settled = match reconciled {
        Ok(done) if done.payment.pending_operation.is_none() => done.payment,
        Ok(_) | Err(PaymentError::Processor(_)) => {
            // When the settle job asks again; an answer that asks for a retry is not stored
            // under an `Idempotency-Key`.
            let retry_after = deps.settle_delay().num_seconds().clamp(1, 60) as u32;
            return Err(PaymentError::OperationPending { retry_after });
        }
        Err(e) => return Err(e),
    };
    keyed(&settled).await
}

async fn run_command(
    deps: &PaymentDeps,
    m: &payment::Model,
    command: &Command,
) -> Result<Done, PaymentError> {
    match command {
        Command::Confirm {
            card,
            secret,
            return_url,
        } => confirm(deps, m, card, secret, return_url).await,
        Command::CompleteChallenge { approve } => complete_challenge(deps, m, approve).await,
        Command::Capture {
            amount,
            final_capture,
        } => capture(deps, m, amount, final_capture).await,
        Command::Cancel => cancel(deps, m).await,
        Command::Update(patch) => update(deps, m, patch).await,
        Command::Sync => sync(deps, m).await,
        Command::Refund {
            ask,
            reason,
            metadata,
        } => refund(deps, m, ask, reason, metadata).await,
        Command::SettleRefund { refund_id } => settle_refund(deps, m, refund_id).await,
        Command::OpenDispute => open_dispute(deps, m, None).await,
        Command::ImportCase(case) => open_dispute(deps, m, Some(case)).await,
        Command::Expire => expire(deps, m).await,
    }
}

/// Commits a command's result (with the payment's event and, for a sandbox card that will be
/// disputed, the job that opens the dispute) and wakes the dispatcher for its deliveries.
async fn commit(
    deps: &PaymentDeps,
    m: &payment::Model,
    after: payment::Model,
    mut changes: Changes,
) -> Result<Done, PaymentError> {
    let captured_more = after.amount_captured > m.amount_captured;
    if captured_more
        && after
            .processor_reference
            .as_deref()
            .is_some_and(|r| deps.sandbox.opens_dispute(r))
    {
        changes.dispute_due = Some(after.updated_at + deps.settle_delay());
    }
    // The row as committed: the event's object carries the version this commit writes.
    let after = store::raised(m, after);
    if let Some(event_type) = event_for(m, &after, changes.trigger) {
        changes.events.insert(
            0,
            Announcement {
                event_type,
                content_type: "payment_details",
                object_id: after.id.to_string(),
                object: serde_json::to_string(&Payment::render(&after, &deps.public_url)?)
                    .unwrap_or_default(),
            },
        );
    }
    changes.bind = REQUEST_KEY.try_with(Clone::clone).ok().flatten();
    changes.created = UNWRITTEN.try_with(|u| u.borrow_mut().take()).ok().flatten();
    let committed = store::commit(&deps.db, m, after, changes, deps.settle_delay())
        .await
        .map_err(PaymentError::from)?;
    if committed.deliveries > 0 {
        deps.wake.now();
    }
    Ok(Done {
        payment: committed.payment,
        refund: committed.refund,
        dispute: None,
    })
}

/// Records an operation before a processor that keeps state hears of it (the intent), with
/// the attempts to write alongside; returns the row its outcome will be committed against. A
/// stateless processor needs none: the row is returned as it is.
async fn intend(
    deps: &PaymentDeps,
    m: &payment::Model,
    processor: &dyn Processor,
    mut after: payment::Model,
    intent: Intent,
    attempts: Vec<payment_attempt::Model>,
) -> Result<payment::Model, PaymentError> {
    if !processor.keeps_state() {
        return Ok(m.clone());
    }
    after.updated_at = deps.clock.now();
    let changes = Changes {
        intent: Some(intent),
        attempts,
        ..Changes::of(Trigger::Intent)
    };
    Ok(commit(deps, m, after, changes).await?.payment)
}

/// Commits the processor's answer to an operation. When `base` holds its intent and the
/// commit loses the race, the intent was reconciled meanwhile (its settle job, on another
/// instance): that record stands, and the caller gets it rather than a decision made twice.
async fn record_outcome(
    deps: &PaymentDeps,
    base: &payment::Model,
    after: payment::Model,
    changes: Changes,
) -> Result<Done, PaymentError> {
    let op = base.pending_operation.as_ref().map(|i| i.op());
    if let Some(op) = op {
        fault(deps, op)?;
    }
    match commit(deps, base, after, changes).await {
        Err(PaymentError::LostRace) if op.is_some() => {
            let fresh = store::find(&deps.db, &base.id).await?;
            Ok(Done::unchanged(&fresh.ok_or(PaymentError::NotFound)?))
        }
        other => other,
    }
}

/// The test fault `sandbox.fail_outcome_commits`: the first commit of an answer to `op` fails
/// as a lost database would make it.
fn fault(deps: &PaymentDeps, op: &str) -> Result<(), PaymentError> {
    if deps.fail_outcomes.take(op) {
        return Err(PaymentError::Db(DbErr::Custom(
            "sandbox.fail_outcome_commits: this outcome's commit fails".into(),
        )));
    }
    Ok(())
}

/// Refuses (400 naming `amount`) an amount the processor's units cannot hold: never rounded.
fn takes_amount(
    processor: &dyn Processor,
    amount: i64,
    currency: &str,
) -> Result<(), PaymentError> {
    match processor.refuses_amount(amount, currency) {
        Some(why) => Err(PaymentError::NotForProcessor {
            param: "amount",
            message: why,
        }),
        None => Ok(()),
    }
}

/// Leaves a payment as it is and keeps its jobs (the settle job asks again).
async fn keep_waiting(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    store::resync_jobs(&deps.db, m, deps.clock.now(), deps.settle_delay()).await?;
    Ok(Done::unchanged(m))
}
