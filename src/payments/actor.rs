//! The payment actor: one per payment id. It serializes every write to its payment — confirm,
//! capture, cancel, update, sync, expiry, challenge — asking the machine, calling the
//! processor, and committing the result with a compare-and-set on the row's version.

use std::{sync::Arc, time::Duration as StdDuration};

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
    api::{lines_of, MandateRequest, Payment, RoutingDecision},
    intent::Intent,
    machine::{self, Authorization, CancelKind, ProcessorView, Status},
    refunds,
    routing::{self, Facts},
    store::{self, Announcement, Changes, SaveCard},
};
use crate::commit::Db;
use crate::{
    clock::{self, SharedClock, Timeline},
    commit,
    customers::{self, api::check_mandate},
    disputes,
    error::ApiError,
    fields::Metadata,
    ids::new_id,
    processors::{
        connect::{self, Connections},
        sandbox::Sandbox,
        AppliedRefund, AuthRequest, AuthResult, Processor, ProcessorError, RefundResult,
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
    /// Rows a handler has just inserted and is about to send a command for: the actor takes
    /// its first state from here instead of reading the row back. The handler removes what
    /// was not taken, so nothing stays.
    pub fresh: DashMap<String, payment::Model>,
    /// The test-only fault of `sandbox.fail_outcome_commits`.
    pub fail_outcomes: Arc<store::FailOutcomes>,
}

impl PaymentDeps {
    /// The processor behind one of the shop's accounts (a shop without accounts has the
    /// implicit sandbox one).
    async fn processor_for(
        &self,
        m: &payment::Model,
        name: &str,
    ) -> Result<Arc<dyn Processor>, PaymentError> {
        let account = store::accounts(&self.db, &m.profile_id)
            .await?
            .into_iter()
            .find(|a| a.name == name);
        if !m.test_mode
            && account
                .as_ref()
                .is_none_or(|a| !connect::serves_live(&a.kind))
        {
            return Err(ProcessorError::Unavailable(
                "a live payment's processor account is gone or is a sandbox".into(),
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
) -> Result<Done, ApiError> {
    if !crate::ids::has_shape(id, "pay") {
        return Err(ApiError::not_found("payment"));
    }
    let exec = Exec {
        access,
        command,
        key,
        timeline: clock::current(),
    };
    Ok(payments.send(id, exec).await??)
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
}

pub struct PaymentActor {
    id: Box<str>,
    /// The stored row as last seen. Dropped `actors.row_cache_ms` after the last message, so
    /// an idle actor holds little more than its address; the next message reads it again.
    /// Boxed: the row is ~600 bytes inline, which an idle actor would otherwise keep.
    model: Option<Box<payment::Model>>,
    /// Messages handled; a cache-drop timer set by an earlier one leaves a newer row alone.
    handled: u64,
    /// Shared by every payment actor: one pointer each, not a copy.
    deps: Arc<PaymentDeps>,
}

impl Actor for PaymentActor {
    type Context = Context<Self>;
}

impl KeyedActor for PaymentActor {
    const KIND: &'static str = "payment";
    type Deps = Arc<PaymentDeps>;
    type LoadError = PaymentError;

    async fn load(id: &str, deps: &Arc<PaymentDeps>) -> Result<Self, PaymentError> {
        let model = match deps.fresh.remove(id) {
            Some((_, model)) => model,
            None => store::find(&deps.db, id)
                .await?
                .ok_or(PaymentError::NotFound)?,
        };
        Ok(Self {
            id: id.into(),
            model: Some(Box::new(model)),
            handled: 0,
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
        self.handled += 1;
        AtomicResponse::new(Box::pin(
            async move {
                let current = match cached {
                    Some(m) => *m,
                    None => match store::find(&deps.db, &id).await {
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
                let (latest, result) = clock::scoped(timeline, exec(&deps, current, msg)).await;
                (Some(Box::new(latest)), result)
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
                | PaymentError::Invalid(_),
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
            let mut pending = ApiError::conflict(
                "processor_operation_pending",
                "an operation sent to the processor has no recorded outcome yet; payd asks the processor again shortly, retry after that",
            )
            .param("payment_id");
            // When the settle job asks again; an answer that asks for a retry is not stored
            // under an `Idempotency-Key`.
            pending.retry_after = Some(deps.settle_delay().num_seconds().clamp(1, 60) as u32);
            return Err(PaymentError::Invalid(pending));
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
                object_id: after.id.clone(),
                object: serde_json::to_string(&Payment::render(&after, &deps.public_url)?)
                    .unwrap_or_default(),
            },
        );
    }
    changes.bind = REQUEST_KEY.try_with(Clone::clone).ok().flatten();
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
        trigger: "intent",
        intent: Some(intent),
        attempts,
        ..Default::default()
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
    let op = match &base.pending_operation {
        Some(raw) => Some(crate::stored::json::<Intent>("pending_operation", &base.id, raw)?.op()),
        None => None,
    };
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

/// Leaves a payment as it is and keeps its jobs (the settle job asks again).
async fn keep_waiting(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    store::resync_jobs(&deps.db, m, deps.clock.now(), deps.settle_delay()).await?;
    Ok(Done::unchanged(m))
}

/// Reconciles the operation whose outcome the payment has not recorded: an authorization by
/// a sync of its reference; a challenge's answer, a capture or a void by the same request with
/// the same key. No answer yet leaves it (and its settle job) as it is.
async fn reconcile(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    let Some(raw) = &m.pending_operation else {
        return Ok(Done::unchanged(m));
    };
    let intent = crate::stored::json::<Intent>("pending_operation", &m.id, raw)?;
    let now = deps.clock.now();
    let (account, reference) = match &intent {
        Intent::Authorize {
            account, reference, ..
        } => (account.clone(), reference.clone()),
        _ => processor_of(m)?,
    };
    let processor = deps.processor_for(m, &account).await?;
    match intent {
        Intent::Authorize { attempt_id, at, .. } => {
            let deadline = Duration::from_std(processor.answer_deadline()).unwrap_or_default();
            let (outcome, error) = match processor.sync(&reference, now).await? {
                ProcessorView::Authorized { amount } | ProcessorView::Captured { amount } => {
                    (Authorization::Approved { amount }, None)
                }
                ProcessorView::Declined { retryable } => (
                    Authorization::Declined { retryable },
                    Some(("card_declined", "the processor declined the authorization")),
                ),
                ProcessorView::Unknown if now - at > deadline => (
                    Authorization::Declined { retryable: true },
                    Some((
                        "processor_unavailable",
                        "the authorization never reached the processor",
                    )),
                ),
                // Pending, or no trace yet of a request that may still arrive.
                _ => return keep_waiting(deps, m).await,
            };
            let found = match error {
                Some(("processor_unavailable", _)) => reference.clone(),
                _ => processor.locate(&reference).await?,
            };
            let result = AuthResult {
                reference: Some(found),
                outcome,
                error: error.map(|(c, msg)| (c.to_owned(), msg.to_owned())),
                token: None,
            };
            let card = card_of(m)?.ok_or_else(|| {
                PaymentError::Invalid(ApiError::internal("an authorization's card is not stored"))
            })?;
            let attempt = store::find_attempt(&deps.db, &attempt_id)
                .await?
                .ok_or_else(|| {
                    PaymentError::Invalid(ApiError::internal("an authorization's attempt is gone"))
                })?;
            let mandate = match (&m.mandate_id, m.off_session) {
                (Some(id), true) => customers::store::find_mandate(&deps.db, id).await?,
                _ => None,
            };
            let authorized = Authorized {
                chosen: account,
                can_save: processor.can_save(&card),
                attempts: vec![answered(attempt, m, &result)],
                result,
                intent: None,
            };
            confirmed(deps, m, card, mandate, authorized, &None).await
        }
        Intent::Challenge { approve } => {
            let answer = processor.complete_challenge(&reference, approve, now).await;
            challenged(deps, m, answer).await
        }
        Intent::Capture {
            key,
            amount,
            final_capture,
        } => {
            let answer = processor.capture(&reference, amount, &key).await;
            captured(deps, m, amount, final_capture, answer).await
        }
        Intent::Void { key, to, expiry } => {
            let answer = processor.void(&reference, &key).await;
            voided(deps, m, &to, expiry, answer).await
        }
    }
}

/// The changes of a transition that writes only the payment.
fn plain(trigger: &'static str) -> Changes {
    Changes {
        trigger,
        ..Default::default()
    }
}

/// Authorizes through routing (and saves the card, spends a single-use mandate).
async fn confirm(
    deps: &PaymentDeps,
    m: &payment::Model,
    card: &Option<StoredCard>,
    secret: &Option<SecretCard>,
    return_url: &Option<String>,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    machine::check_confirm(&state)?;
    let card = match card {
        Some(card) => Some(card.clone()),
        None => card_of(m)?,
    };
    let card = card.ok_or_else(|| {
        PaymentError::Invalid(
            ApiError::invalid("payment_method_required", "confirm needs a payment method")
                .param("payment_method_data"),
        )
    })?;
    // An off-session charge re-checks its mandate here, where a revoke cannot slip in
    // between the check and the commit (the mandate's version guards the commit).
    let mandate = match (&m.mandate_id, m.off_session) {
        (Some(id), true) => {
            let mandate = customers::store::find_mandate(&deps.db, id).await?.ok_or(
                PaymentError::Invalid(ApiError::not_found("mandate").param("mandate_id")),
            )?;
            check_mandate(&mandate, m.amount, &m.currency, now).map_err(PaymentError::Invalid)?;
            Some(mandate)
        }
        _ => None,
    };
    let (base, authorized) = authorize(deps, m, &card, secret.clone(), now).await?;
    confirmed(deps, &base, card, mandate, authorized, return_url).await
}

/// Commits a confirm's answer: the payment's new state, its attempts, the saved card and its
/// mandate, the single-use mandate it spent. An authorization still pending keeps its intent,
/// so that its reconciliation can tell a processor that never got the request.
async fn confirmed(
    deps: &PaymentDeps,
    m: &payment::Model,
    card: StoredCard,
    mandate: Option<mandate::Model>,
    authorized: Authorized,
    return_url: &Option<String>,
) -> Result<Done, PaymentError> {
    let Authorized {
        chosen,
        result,
        attempts,
        can_save,
        intent,
    } = authorized;
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    let next = machine::confirm(&state, result.outcome, now);
    let mut after = store::with_state(m, &next, now);
    let approved = matches!(result.outcome, Authorization::Approved { .. });
    // Saved at the processor too: the saved card charges there by its token.
    let card = StoredCard {
        token: result.token.clone().or(card.token),
        ..card
    };
    let save = match (&m.customer_id, &m.setup_future_usage) {
        (Some(customer_id), Some(_)) if can_save => {
            let mandate: Option<MandateRequest> =
                crate::stored::json_opt("mandate_request", &m.id, m.mandate_request.as_deref())?;
            let mandate_id = mandate.as_ref().map(|_| new_id("man"));
            if mandate_id.is_some() {
                after.mandate_id = mandate_id.clone();
            }
            Some(SaveCard {
                customer_id: customer_id.clone(),
                card: card.clone(),
                mandate: mandate.zip(mandate_id),
            })
        }
        _ => None,
    };
    // Invariant: a single-use mandate is spent by the charge it approved, in the same commit.
    let spend_mandate = mandate.filter(|md| approved && md.mandate_type == "single_use");
    after.payment_method = serde_json::to_string(&card).ok();
    after.processor = Some(chosen);
    after.processor_reference = result.reference.clone();
    after.last_error = last_error(&result);
    after.capture_before = deps.capture_before(&next, now);
    if return_url.is_some() {
        after.return_url = return_url.clone();
    }
    let changes = Changes {
        trigger: "confirm",
        attempts,
        save,
        spend_mandate,
        intent: intent.filter(|_| result.outcome == Authorization::Pending),
        ..Default::default()
    };
    record_outcome(deps, m, after, changes).await
}

/// The buyer's answer to a 3-D Secure challenge.
async fn complete_challenge(
    deps: &PaymentDeps,
    m: &payment::Model,
    approve: &bool,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    machine::check_challenge(&state)?;
    let (account, reference) = processor_of(m)?;
    let processor = deps.processor_for(m, &account).await?;
    let intent = Intent::Challenge { approve: *approve };
    let base = intend(deps, m, &*processor, m.clone(), intent, vec![]).await?;
    let answer = processor
        .complete_challenge(&reference, *approve, now)
        .await;
    challenged(deps, &base, answer).await
}

/// Commits the processor's answer to a completed challenge (an authorization, or a decline).
/// A refusal clears its intent and is answered; no answer leaves it to be reconciled.
async fn challenged(
    deps: &PaymentDeps,
    base: &payment::Model,
    answer: Result<AuthResult, ProcessorError>,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(base));
    let result = match answer {
        Ok(result) => result,
        Err(e) => return Err(not_done(deps, base, "challenge_refused", e).await),
    };
    let next = machine::complete_challenge(&state, result.outcome, now);
    let mut after = store::with_state(base, &next, now);
    after.last_error = last_error(&result);
    after.capture_before = deps.capture_before(&next, now);
    record_outcome(deps, base, after, plain("challenge")).await
}

/// Captures part or all of what is authorized.
async fn capture(
    deps: &PaymentDeps,
    m: &payment::Model,
    amount: &Option<i64>,
    final_capture: &bool,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    let amount = machine::capture_amount(&state, *amount)?;
    machine::capture(&state, amount, *final_capture, now)?;
    let (account, reference) = processor_of(m)?;
    let processor = deps.processor_for(m, &account).await?;
    let key = op_key(m, "capture");
    let intent = Intent::Capture {
        key: key.clone(),
        amount,
        final_capture: *final_capture,
    };
    let base = intend(deps, m, &*processor, m.clone(), intent, vec![]).await?;
    let answer = processor.capture(&reference, amount, &key).await;
    captured(deps, &base, amount, *final_capture, answer).await
}

/// Commits the processor's answer to a capture. A refusal clears its intent (nothing was
/// captured) and is answered; no answer leaves the intent to be reconciled.
async fn captured(
    deps: &PaymentDeps,
    base: &payment::Model,
    amount: i64,
    final_capture: bool,
    answer: Result<(), ProcessorError>,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(base));
    match answer {
        Ok(()) => {
            let next = machine::capture(&state, amount, final_capture, now)?;
            let after = store::with_state(base, &next, now);
            record_outcome(deps, base, after, plain("capture")).await
        }
        Err(e) => Err(not_done(deps, base, "capture_refused", e).await),
    }
}

/// The error of an operation the processor did not carry out. A refusal clears its intent
/// first (the payment is as it was before it); no answer leaves the intent to be reconciled.
async fn not_done(
    deps: &PaymentDeps,
    base: &payment::Model,
    trigger: &'static str,
    e: ProcessorError,
) -> PaymentError {
    if matches!(e, ProcessorError::Refused(_)) && base.pending_operation.is_some() {
        let mut after = base.clone();
        after.updated_at = deps.clock.now();
        if let Err(failed) = record_outcome(deps, base, after, plain(trigger)).await {
            return failed;
        }
    }
    e.into()
}

/// Voids at the processor (unless nothing is held there) and cancels.
async fn cancel(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    let kind = machine::cancel_kind(&state, now)?;
    // Only a void of captured money meets the payment's disputes.
    let disputed = match kind {
        CancelKind::VoidCapture => store::disputed(&deps.db, &m.id).await?,
        _ => refunds::Disputed::default(),
    };
    let next = machine::cancel(&state, now, &disputed)?;
    if kind == CancelKind::Local {
        return commit(deps, m, store::with_state(m, &next, now), plain("cancel")).await;
    }
    void(deps, m, next.status, false).await
}

/// Voids what the processor holds, after which the payment is `to` (for a cancel, or the
/// authorization's lapse: `expiry`): intent, effect, outcome.
async fn void(
    deps: &PaymentDeps,
    m: &payment::Model,
    to: Status,
    expiry: bool,
) -> Result<Done, PaymentError> {
    let (account, reference) = processor_of(m)?;
    let processor = deps.processor_for(m, &account).await?;
    let key = op_key(m, "void");
    let intent = Intent::void(key.clone(), to, expiry);
    let base = intend(deps, m, &*processor, m.clone(), intent, vec![]).await?;
    let answer = processor.void(&reference, &key).await;
    voided(deps, &base, to.as_str(), expiry, answer).await
}

/// Commits the processor's answer to a void: the payment is `to` (decided before the
/// request). A refusal clears its intent and is answered; no answer leaves it to be reconciled.
async fn voided(
    deps: &PaymentDeps,
    base: &payment::Model,
    to: &str,
    expiry: bool,
    answer: Result<(), ProcessorError>,
) -> Result<Done, PaymentError> {
    let (now, mut next) = (deps.clock.now(), super::api::state_of(base));
    let to = Status::parse(to).ok_or_else(|| {
        PaymentError::Invalid(ApiError::internal(format!("a void's stored status {to:?}")))
    })?;
    let trigger = if expiry { "expire" } else { "cancel" };
    match answer {
        Ok(()) => {
            next.status = to;
            record_outcome(
                deps,
                base,
                store::with_state(base, &next, now),
                plain(trigger),
            )
            .await
        }
        Err(e) => Err(not_done(deps, base, "void_refused", e).await),
    }
}

/// Changes fields of a payment not yet confirmed.
async fn update(
    deps: &PaymentDeps,
    m: &payment::Model,
    patch: &Patch,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    machine::check_update(&state)?;
    commit(deps, m, apply_patch(m, patch, now)?, plain("update")).await
}

/// Asks the processor where the payment stands, records the refunds it applied that payd
/// lacks, and settles payd's refunds still pending there.
async fn sync(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    let synced = sync_status(deps, m).await?;
    let adopted = adopt_refunds(deps, &synced.payment).await?;
    settle_pending_refunds(deps, adopted).await
}

/// Asks the processor about each of the payment's refunds still pending that it acknowledged
/// (the others are asked again by their settle jobs, with their idempotency keys).
async fn settle_pending_refunds(deps: &PaymentDeps, done: Done) -> Result<Done, PaymentError> {
    let m = &done.payment;
    let Ok((account, _)) = processor_of(m) else {
        return Ok(done);
    };
    let pending: Vec<refund::Model> = store::refunds_of(&deps.db, &m.id)
        .await?
        .into_iter()
        .filter(|r| r.status == "pending" && r.processor_reference.is_some())
        .collect();
    if pending.is_empty() {
        return Ok(done);
    }
    let processor = deps.processor_for(m, &account).await?;
    let mut payment = m.clone();
    for r in pending {
        let Some(reference) = r.processor_reference.clone() else {
            continue;
        };
        let answer = processor.sync_refund(&reference, deps.clock.now()).await;
        payment = record_refund_outcome(deps, &payment, r, answer)
            .await?
            .payment;
    }
    Ok(Done::unchanged(&payment))
}

/// Asks the processor where a pending payment stands.
async fn sync_status(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    let Ok((account, reference)) = processor_of(m) else {
        return Ok(Done::unchanged(m));
    };
    let view = deps
        .processor_for(m, &account)
        .await?
        .sync(&reference, now)
        .await?;
    let next = machine::settle(&state, view, now);
    if next == state {
        store::resync_jobs(&deps.db, m, now, deps.settle_delay()).await?;
        return Ok(Done::unchanged(m));
    }
    let mut after = store::with_state(m, &next, now);
    if next.status == Status::Conflicted {
        after.conflict = serde_json::to_string(&serde_json::json!({
                "ours": {"status": m.status, "authorized": m.amount_authorized, "captured": m.amount_captured},
                "processor": format!("{view:?}"),
            }))
            .ok();
    }
    after.capture_before = deps.capture_before(&next, now);
    commit(deps, m, after, plain("sync")).await
}

/// Plans a refund against what is captured, refundable and not disputed, and makes it:
/// intent, effect, outcome. Invariant: a processor that keeps state never hears of a refund
/// payd has not recorded. The refund is first committed `pending`, holding its balance, with
/// its settle job; only then is the processor asked, with the refund's id as the idempotency
/// key; its answer is committed last. A crash, a timeout or a failed commit in between leaves
/// a pending refund whose job asks the processor again with the same key (no second effect)
/// and records the outcome. The stateless sandbox is asked first and its answer recorded in
/// one commit (`Processor::keeps_state`).
async fn refund(
    deps: &PaymentDeps,
    m: &payment::Model,
    ask: &refunds::Ask,
    reason: &Option<String>,
    metadata: &Metadata,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    let lines = lines_of(m)?;
    let plan = refunds::plan(
        &state,
        &lines,
        ask,
        &store::disputed(&deps.db, &m.id).await?,
    )?;
    let (account, reference) = processor_of(m)?;
    let (after, mut intent) = reserved(m, &lines, &plan, now);
    intent.reason = reason.clone();
    intent.metadata = serde_json::to_string(metadata).unwrap_or_else(|_| "{}".into());
    let processor = deps.processor_for(m, &account).await?;
    if !processor.keeps_state() {
        // Nothing a crash could make payd forget: asked first, recorded once with its answer.
        let answer = processor
            .refund(&reference, plan.amount, now, &intent.id)
            .await;
        return refund_answered(deps, m, after, intent, answer).await;
    }
    let changes = Changes {
        trigger: "refund",
        refund: Some(intent),
        ..Default::default()
    };
    let recorded = commit(deps, m, after, changes).await?;
    let (m, r) = (
        recorded.payment,
        recorded.refund.ok_or(PaymentError::RefundNotFound)?,
    );
    let answer = processor.refund(&reference, r.amount, now, &r.id).await;
    match record_refund_outcome(deps, &m, r.clone(), answer).await {
        // Recorded meanwhile (its settle job, on another instance): that record stands, and
        // this request must not decide again.
        Err(PaymentError::LostRace) => Ok(Done {
            payment: store::find(&deps.db, &m.id).await?.unwrap_or(m),
            refund: store::find_refund(&deps.db, &r.id).await?.or(Some(r)),
            dispute: None,
        }),
        other => other,
    }
}

/// The payment with a refund's balance reserved (on the payment and its lines), and that
/// refund, `pending`, not yet stored.
fn reserved(
    m: &payment::Model,
    lines: &[super::api::Line],
    plan: &refunds::Plan,
    now: DateTime<Utc>,
) -> (payment::Model, refund::Model) {
    let (next, next_lines) = refunds::reserve(&super::api::state_of(m), lines, plan);
    let mut after = store::with_state(m, &next, now);
    if m.lines.is_some() {
        after.lines = serde_json::to_string(&next_lines).ok();
    }
    let refund = refund::Model {
        id: new_id("ref"),
        payment_id: m.id.clone(),
        merchant_id: m.merchant_id.clone(),
        profile_id: m.profile_id.clone(),
        test_mode: m.test_mode,
        status: "pending".to_owned(),
        amount: plan.amount,
        currency: m.currency.clone(),
        lines: serde_json::to_string(&plan.lines).unwrap_or_else(|_| "[]".into()),
        reason: None,
        metadata: "{}".to_owned(),
        processor_reference: None,
        failure_reason: None,
        version: 0,
        created_at: now,
        updated_at: now,
    };
    (after, refund)
}

/// Commits a refund a stateless processor has answered, with the balance it holds (none for
/// a failed one) and its event, in one commit.
async fn refund_answered(
    deps: &PaymentDeps,
    m: &payment::Model,
    reserved: payment::Model,
    mut r: refund::Model,
    answer: Result<RefundResult, ProcessorError>,
) -> Result<Done, PaymentError> {
    let (status, reference) = refund_answer(answer).unwrap_or((RefundStatus::Pending, None));
    r.processor_reference = reference;
    let after = match status {
        RefundStatus::Pending => reserved,
        RefundStatus::Succeeded => {
            r.status = "succeeded".into();
            reserved
        }
        RefundStatus::Failed(why) => {
            r.status = "failed".into();
            r.failure_reason = Some(why);
            let mut unchanged = m.clone();
            unchanged.updated_at = r.updated_at;
            unchanged
        }
    };
    let changes = Changes {
        trigger: "refund",
        events: refund_event(&r)?,
        refund: Some(r),
        ..Default::default()
    };
    commit(deps, m, after, changes).await
}

/// What a processor's answer makes of a refund: its status and reference, or `None` when
/// there was no answer (a timeout, an unreachable processor).
fn refund_answer(
    answer: Result<RefundResult, ProcessorError>,
) -> Option<(RefundStatus, Option<String>)> {
    match answer {
        Ok(result) => Some((result.status, Some(result.reference))),
        Err(ProcessorError::Refused(why)) => Some((RefundStatus::Failed(why), None)),
        Err(ProcessorError::Unavailable(_) | ProcessorError::Timeout) => None,
    }
}

/// Where a pending refund stands: one whose request never got an answer is asked again with
/// the same idempotency key (the processor answers its first answer, without a second effect);
/// one the processor acknowledged is synced by its reference. The payment's refunds at the
/// processor that payd lacks are recorded first.
async fn settle_refund(
    deps: &PaymentDeps,
    m: &payment::Model,
    refund_id: &str,
) -> Result<Done, PaymentError> {
    let now = deps.clock.now();
    let Some(r) = store::find_refund(&deps.db, refund_id)
        .await?
        .filter(|r| r.payment_id == m.id)
    else {
        return Err(PaymentError::RefundNotFound);
    };
    // The payment's other refunds at the processor first: those payd lacks are recorded.
    let adopted = adopt_refunds(deps, m).await?;
    let m = &adopted.payment;
    if !matches!(r.status.as_str(), "pending" | "manual_review") {
        return Ok(Done::refund(m, r));
    }
    let (account, reference) = processor_of(m)?;
    let processor = deps.processor_for(m, &account).await?;
    let answer = match &r.processor_reference {
        None => processor.refund(&reference, r.amount, now, &r.id).await,
        Some(refund_reference) => processor.sync_refund(refund_reference, now).await,
    };
    record_refund_outcome(deps, m, r, answer).await
}

/// Commits what the processor answered about a pending refund. A settled answer ends it (a
/// failed one gives its balance back); no answer (timeout, unreachable) keeps it pending, and
/// its settle job asks again.
async fn record_refund_outcome(
    deps: &PaymentDeps,
    m: &payment::Model,
    mut r: refund::Model,
    answer: Result<RefundResult, ProcessorError>,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    let Some((status, reference)) = refund_answer(answer) else {
        store::resync_refund_job(&deps.db, &r, now, deps.settle_delay()).await?;
        return Ok(Done::refund(m, r));
    };
    fault(deps, "refund")?;
    let mut after = m.clone();
    let unchanged = matches!(status, RefundStatus::Pending) && r.processor_reference == reference;
    match status {
        RefundStatus::Pending => {}
        RefundStatus::Succeeded => r.status = "succeeded".into(),
        RefundStatus::Failed(why) => {
            let plan = refunds::Plan {
                amount: r.amount,
                lines: crate::stored::json("lines", &r.id, &r.lines)?,
            };
            let (next, next_lines) = refunds::release(&state, &lines_of(m)?, &plan);
            after = store::with_state(m, &next, now);
            if m.lines.is_some() {
                after.lines = serde_json::to_string(&next_lines).ok();
            }
            r.status = "failed".into();
            r.failure_reason = Some(why);
        }
    }
    if unchanged {
        store::resync_refund_job(&deps.db, &r, now, deps.settle_delay()).await?;
        return Ok(Done::refund(m, r));
    }
    r.processor_reference = reference.or(r.processor_reference);
    r.updated_at = now;
    if r.status != "failed" {
        // The payment already holds the refund's balance: only the refund changes.
        let events = refund_event(&r)?;
        let (r, deliveries) =
            store::commit_refund(&deps.db, r, events, now, deps.settle_delay()).await?;
        if deliveries > 0 {
            deps.wake.now();
        }
        return Ok(Done::refund(m, r));
    }
    after.updated_at = now;
    let changes = Changes {
        trigger: "refund_settled",
        events: refund_event(&r)?,
        refund: Some(r),
        ..Default::default()
    };
    commit(deps, m, after, changes).await
}

/// Records the refunds the processor applied that payd has no record of — made in its
/// dashboard, or by an integration beside payd — each with `refund_succeeded` once, its amount
/// taken from what is refundable (an open dispute does not stop what the processor already
/// did). One the payment cannot hold makes it `conflicted`. A processor that cannot list
/// refunds now leaves the payment as it is: the next sync asks again.
async fn adopt_refunds(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    let Ok((account, reference)) = processor_of(m) else {
        return Ok(Done::unchanged(m));
    };
    if m.amount_captured == 0 {
        return Ok(Done::unchanged(m));
    }
    let listed = match deps
        .processor_for(m, &account)
        .await?
        .refunds(&reference)
        .await
    {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!(payment_id = %m.id, error = %e, "the processor's refunds could not be listed");
            return Ok(Done::unchanged(m));
        }
    };
    if listed.is_empty() {
        return Ok(Done::unchanged(m));
    }
    let known = store::refunds_of(&deps.db, &m.id).await?;
    let is_known = |reference: &str| {
        known
            .iter()
            .any(|r| r.id == reference || r.processor_reference.as_deref() == Some(reference))
    };
    let mut done = Done::unchanged(m);
    for applied in listed {
        if matches!(applied.status, RefundStatus::Failed(_)) || is_known(&applied.reference) {
            continue;
        }
        done = adopt_refund(deps, &done.payment, applied).await?;
        if done.payment.status == Status::Conflicted.as_str() {
            break;
        }
    }
    Ok(done)
}

/// Records one refund the processor made without payd.
async fn adopt_refund(
    deps: &PaymentDeps,
    m: &payment::Model,
    applied: AppliedRefund,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    let lines = lines_of(m)?;
    let mut disputed = store::disputed(&deps.db, &m.id).await?;
    disputed.open = None;
    let ask = refunds::Ask::Amount(Some(applied.amount));
    let Ok(plan) = refunds::plan(&state, &lines, &ask, &disputed) else {
        let mut after = m.clone();
        after.status = Status::Conflicted.as_str().to_owned();
        after.updated_at = now;
        after.conflict = serde_json::to_string(&serde_json::json!({
            "ours": {"status": m.status, "captured": m.amount_captured, "refunded": m.amount_refunded},
            "processor": {"refund": applied.reference, "amount": applied.amount},
        }))
        .ok();
        return commit(deps, m, after, plain("sync")).await;
    };
    let (after, mut refund) = reserved(m, &lines, &plan, now);
    if applied.status == RefundStatus::Succeeded {
        refund.status = "succeeded".to_owned();
    }
    refund.reason = Some("made at the processor, outside payd".to_owned());
    refund.processor_reference = Some(applied.reference);
    let changes = Changes {
        trigger: "refund_adopted",
        events: refund_event(&refund)?,
        refund: Some(refund),
        ..Default::default()
    };
    commit(deps, m, after, changes).await
}

/// The processor reports the buyer's dispute of what was captured.
/// Opens the payment's dispute: the card sandbox's (`case: None`) or a wallet case's. A payment
/// has at most one dispute.
async fn open_dispute(
    deps: &PaymentDeps,
    m: &payment::Model,
    case: Option<&disputes::actor::CaseOpening>,
) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    // Nothing left to dispute (refunded, or given back by a cancel after capture), or disputed.
    let Some(left) = machine::dispute_amount(&state) else {
        return Ok(Done::unchanged(m));
    };
    if !disputes::store::of_payment(&deps.db, &m.id)
        .await?
        .is_empty()
    {
        return Ok(Done::unchanged(m));
    }
    let opening = match case {
        Some(c) => disputes::store::Opening {
            stage: c.stage,
            amount: c.amount.min(left),
            reason: c.reason.clone(),
            processor: Some(c.processor.clone()),
            processor_reference: Some(c.case_id.clone()),
            evidence_due_by: c.due_by,
            case_id: Some(c.case_id.clone()),
        },
        None => disputes::store::Opening {
            stage: disputes::machine::Stage::Dispute,
            amount: left,
            reason: "fraudulent".to_owned(),
            processor: m.processor.clone(),
            processor_reference: m
                .processor_reference
                .as_ref()
                .map(|r| format!("{r}.dispute")),
            evidence_due_by: disputes::actor::due_by(now),
            case_id: None,
        },
    };
    let dispute = disputes::store::opened(m, opening, now);
    let mut after = m.clone();
    after.updated_at = now;
    let changes = Changes {
        trigger: "dispute",
        dispute: Some(dispute.clone()),
        ..Default::default()
    };
    // Committed means this command opened it: a case's dispute that another instance opened
    // first makes the commit a lost race (the insert must add its row), decided again.
    let mut done = commit(deps, m, after, changes).await?;
    done.dispute = Some(dispute);
    Ok(done)
}

/// Expires an unconfirmed payment or a lapsed authorization (releasing what is held).
async fn expire(deps: &PaymentDeps, m: &payment::Model) -> Result<Done, PaymentError> {
    let (now, state) = (deps.clock.now(), super::api::state_of(m));
    let Some(next) = machine::expire(&state, now, m.expires_at, m.capture_before) else {
        store::resync_jobs(&deps.db, m, now, deps.settle_delay()).await?;
        return Ok(Done::unchanged(m));
    };
    // Release what the processor still holds for us.
    if state.status.is_capturable() && processor_of(m).is_ok() {
        return void(deps, m, next.status, true).await;
    }
    commit(deps, m, store::with_state(m, &next, now), plain("expire")).await
}

/// What routing and the processors decided about a confirm.
struct Authorized {
    /// The account whose answer counts.
    chosen: String,
    result: AuthResult,
    /// Every processor tried, in order.
    attempts: Vec<payment_attempt::Model>,
    /// Whether the chosen processor keeps the card for later charges.
    can_save: bool,
    /// The intent recorded for the chosen processor's attempt (none for a stateless one).
    intent: Option<Intent>,
}

/// A decline decided without asking any processor, because none can be asked.
struct Declined<'a> {
    /// The account the attempt is recorded against.
    processor: &'a str,
    retryable: bool,
    code: &'static str,
    message: &'static str,
    /// Why routing chose nothing.
    reason: &'static str,
}

impl Declined<'_> {
    fn authorized(
        self,
        m: &payment::Model,
        number: i32,
        card: &StoredCard,
        now: DateTime<Utc>,
        can_save: bool,
    ) -> Authorized {
        let result = AuthResult {
            reference: None,
            outcome: Authorization::Declined {
                retryable: self.retryable,
            },
            error: Some((self.code.into(), self.message.into())),
            token: None,
        };
        let decision = RoutingDecision {
            algorithm: "none".into(),
            rule: None,
            candidates: vec![],
            chosen: self.processor.to_owned(),
            reason: self.reason.into(),
        };
        let attempt = attempt_row(m, number, self.processor, card, &decision, now);
        Authorized {
            chosen: self.processor.to_owned(),
            attempts: vec![answered(attempt, m, &result)],
            result,
            can_save,
            intent: None,
        }
    }
}

/// Routes the authorization and falls back to the next processor after a retryable decline
/// or an unreachable processor. Each attempt at a processor that keeps state is recorded as
/// an intent before it is sent (with the answers of the attempts before it); returns the row
/// the last intent left, and what was decided.
async fn authorize(
    deps: &PaymentDeps,
    m: &payment::Model,
    card: &StoredCard,
    secret: Option<SecretCard>,
    now: DateTime<Utc>,
) -> Result<(payment::Model, Authorized), PaymentError> {
    let first = store::next_attempt_number(&deps.db, m).await?;
    // Invariant: a live payment never reaches the sandbox, neither the implicit one of a shop
    // without accounts nor a sandbox account a test key added.
    let (accounts, rules) = store::accounts_and_rules(&deps.db, &m.profile_id).await?;
    let enabled: Vec<processor_account::Model> = accounts
        .into_iter()
        .filter(|a| a.enabled && a.approval == "approved")
        .filter(|a| m.test_mode || connect::serves_live(&a.kind))
        .collect();
    if enabled.is_empty() && !m.test_mode {
        let declined = Declined {
            processor: "none",
            retryable: false,
            code: "no_processor",
            message: "the shop has no processor for live payments",
            reason: "no processor account that serves live payments is enabled",
        };
        return Ok((m.clone(), declined.authorized(m, first, card, now, false)));
    }
    // An open circuit takes its processor out of routing until it recovers.
    let accounts: Vec<String> = enabled
        .iter()
        .filter(|a| deps.resolve(Some(a)).is_some_and(|p| p.available()))
        .map(|a| a.name.clone())
        .collect();
    if accounts.is_empty() && !enabled.is_empty() {
        let declined = Declined {
            processor: &enabled[0].name,
            retryable: true,
            code: "processor_unavailable",
            message: "no processor of the shop is available now",
            reason: "every processor's circuit is open",
        };
        let can_save = deps
            .resolve(Some(&enabled[0]))
            .is_some_and(|p| p.can_save(card));
        return Ok((
            m.clone(),
            declined.authorized(m, first, card, now, can_save),
        ));
    }
    let decision = routing::decide(
        &rules,
        &accounts,
        &Facts {
            payment_id: &m.id,
            amount: m.amount,
            currency: &m.currency,
            brand: card.brand,
        },
    );
    let mut base = m.clone();
    let mut attempts: Vec<payment_attempt::Model> = Vec::new();
    let mut previous: Option<String> = None;
    let mut last = None;
    for candidate in &decision.candidates {
        // Candidates were routed among the accounts that resolve.
        let account = enabled.iter().find(|a| &a.name == candidate);
        let Some(processor) = deps.resolve(account) else {
            continue;
        };
        // Each attempt its own number, and so its own processor reference.
        let number = first + attempts.len() as i32;
        let this_decision = match &previous {
            None => decision.clone(),
            Some(p) => routing::fallback(&decision, p, candidate),
        };
        let reference = format!("{}.{number}.{candidate}", m.id);
        let attempt = attempt_row(m, number, candidate, card, &this_decision, now);
        let intent = Intent::Authorize {
            attempt_id: attempt.id.clone(),
            account: candidate.clone(),
            reference: reference.clone(),
            at: now,
        };
        let mut after = base.clone();
        after.payment_method = serde_json::to_string(card).ok();
        let recorded = [attempts.as_slice(), std::slice::from_ref(&attempt)].concat();
        base = intend(deps, &base, &*processor, after, intent.clone(), recorded).await?;
        let request = AuthRequest {
            reference,
            payment_id: m.id.clone(),
            amount: m.amount,
            currency: m.currency.clone(),
            capture: m.capture_method == "automatic",
            partial_allowed: m.enable_partial_authorization,
            card: card.clone(),
            secret: secret.clone(),
            save: save_for(deps, m, account).await?,
            off_session: m.off_session,
            now,
        };
        let result = match processor.authorize(request).await {
            Ok(r) => r,
            Err(ProcessorError::Unavailable(why)) => AuthResult {
                reference: None,
                outcome: Authorization::Declined { retryable: true },
                error: Some(("processor_unavailable".into(), why)),
                token: None,
            },
            Err(e) => return Err(e.into()),
        };
        attempts.push(answered(attempt, m, &result));
        let retry = matches!(result.outcome, Authorization::Declined { retryable: true });
        let intent = processor.keeps_state().then_some(intent);
        last = Some((candidate.clone(), result, processor.can_save(card), intent));
        if !retry {
            break;
        }
        previous = Some(candidate.clone());
    }
    let (chosen, result, can_save, intent) =
        last.ok_or_else(|| PaymentError::Invalid(ApiError::internal("no processor candidate")))?;
    let authorized = Authorized {
        chosen,
        result,
        attempts,
        can_save,
        intent,
    };
    Ok((base, authorized))
}

/// The customer a payment saves its card for, with the customer it already has at the
/// account (a processor that keeps cards files them all under one).
async fn save_for(
    deps: &PaymentDeps,
    m: &payment::Model,
    account: Option<&processor_account::Model>,
) -> Result<Option<SaveFor>, PaymentError> {
    let (Some(customer_id), Some(_)) = (&m.customer_id, &m.setup_future_usage) else {
        return Ok(None);
    };
    let known_customer = match account {
        Some(a) => customers::store::processor_customer(&deps.db, customer_id, &a.id).await?,
        None => None,
    };
    Ok(Some(SaveFor {
        customer_id: customer_id.clone(),
        known_customer,
    }))
}
