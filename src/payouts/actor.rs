//! The payout actor: one per payout id. It serializes every change of its payout — update,
//! confirm (the reservation), fulfil, cancel, and what the processor says — and commits each
//! with a compare-and-set on the row's version.
//!
//! Intent before effect: a payout goes to the processor by committing `initiated` (with its
//! `submitted_at` and a sync job) first; the processor's answer is asked for and committed
//! after. A crash between the two leaves the job, which asks again.

use actix::Message;
use chrono::{DateTime, Duration, Utc};
use payd_entity::payout;
use sea_orm::DbErr;

use super::api::Destination;
use super::{
    machine::{self, Cancel, Outcome, Refusal, Status},
    processor, store,
    store::CommitError,
};
use crate::commit::Db;
use crate::fields::Metadata;
use crate::stored::Json;
use crate::{
    auth::keys::Scope,
    clock::{SharedClock, Timeline},
    commit,
    conflict::Conflict,
    row_actor::{Row, RowActor},
    wake::Wake,
};

pub struct PayoutDeps {
    pub db: Db,
    pub clock: SharedClock,
    pub wake: Wake,
    /// How long the sandbox processor takes to settle or reverse.
    pub delay: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum PayoutError {
    #[error("no such payout")]
    NotFound,
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("the available balance does not cover the payout")]
    InsufficientBalance,
    #[error("the processor has paid the payout out already: it cannot be cancelled")]
    NotCancellable,
    #[error("the payout was changed concurrently")]
    LostRace,
    /// A condition the change needed no longer held when it was written.
    #[error(transparent)]
    Conflict(Conflict),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

impl From<CommitError> for PayoutError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::Refused(Conflict::InsufficientBalance) => PayoutError::InsufficientBalance,
            CommitError::LostRace => PayoutError::LostRace,
            CommitError::Refused(c) => PayoutError::Conflict(c),
            CommitError::Db(e) => PayoutError::Db(e),
        }
    }
}

/// A payout's new fields before it is confirmed (checked by the route); `None` keeps one.
#[derive(Debug, Clone, Default)]
pub struct Patch {
    pub amount: Option<i64>,
    pub currency: Option<String>,
    /// The masked destination (JSON) and the processor's token.
    pub destination: Option<(Destination, String)>,
    pub auto_fulfill: Option<bool>,
    pub description: Option<String>,
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone)]
pub enum Command {
    Update(Box<Patch>),
    Confirm,
    Fulfill,
    Cancel,
    /// Ask the processor what became of it.
    Sync,
    /// Expire it if it never went to the processor and its time has come.
    Expire,
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<payout::Model, PayoutError>")]
pub struct Exec {
    /// `None`: payd itself (a job).
    pub scope: Option<Scope>,
    pub command: Command,
    pub timeline: Timeline,
}

pub type Payouts = payd_actors::Registry<RowActor<PayoutRow>>;

/// A payout's actor (one per payout): how its row is found and how its commands run.
pub struct PayoutRow;

impl Row for PayoutRow {
    const KIND: &'static str = "payout";
    type Model = payout::Model;
    type Deps = PayoutDeps;
    type Error = PayoutError;
    type Done = payout::Model;
    type Exec = Exec;
    type Id = crate::ids::PayoutId;

    fn db(deps: &PayoutDeps) -> &Db {
        &deps.db
    }

    async fn find(db: &Db, id: &crate::ids::PayoutId) -> Result<Option<payout::Model>, DbErr> {
        store::find(db, id).await
    }

    fn not_found() -> PayoutError {
        PayoutError::NotFound
    }

    fn is_not_found(error: &PayoutError) -> bool {
        matches!(error, PayoutError::NotFound)
    }

    fn owner(m: &payout::Model) -> (&crate::ids::MerchantId, bool) {
        (&m.merchant_id, m.test_mode)
    }

    fn timeline(msg: &Exec) -> &Timeline {
        &msg.timeline
    }

    async fn exec(
        deps: &PayoutDeps,
        current: payout::Model,
        msg: Exec,
    ) -> (payout::Model, Result<payout::Model, PayoutError>) {
        if let Some(scope) = &msg.scope {
            if !scope.sees(&current.merchant_id, current.test_mode, &current.profile_id) {
                return (current, Err(PayoutError::NotFound));
            }
        }
        commit::decide_fresh(
            current,
            async |m: &payout::Model| step(deps, m, &msg.command).await,
            |result, m| match result {
                Err(PayoutError::LostRace | PayoutError::Refused(_)) => true,
                Ok(done) => done.version == m.version,
                Err(_) => false,
            },
            async |m: &payout::Model| Ok(store::find(&deps.db, &m.id).await?),
            |done: &payout::Model| done,
            || PayoutError::NotFound,
        )
        .await
    }
}

/// When to ask the processor next about a payout it has: at its next change, or (an answer
/// not yet committed) a minute on.
fn next_sync(deps: &PayoutDeps, m: &payout::Model, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let submitted = m.submitted_at?;
    match m.status {
        Status::Initiated => Some(machine::ask_again_at(now)),
        Status::Pending | Status::Success => {
            processor::next_change(&m.recipient, submitted, now, deps.delay)
        }
        _ => None,
    }
}

async fn save(
    deps: &PayoutDeps,
    before: &payout::Model,
    after: payout::Model,
) -> Result<payout::Model, PayoutError> {
    let at = next_sync(deps, &after, after.updated_at);
    let (after, deliveries) = store::commit(&deps.db, before, after, at).await?;
    if deliveries > 0 {
        deps.wake.now();
    }
    Ok(after)
}

async fn step(
    deps: &PayoutDeps,
    m: &payout::Model,
    command: &Command,
) -> Result<payout::Model, PayoutError> {
    let now = deps.clock.now();
    let status = m.status;
    let mut after = m.clone();
    after.updated_at = now;
    match command {
        Command::Update(patch) => {
            machine::update(status)?;
            if let Some(a) = patch.amount {
                after.amount = a;
            }
            if let Some(c) = &patch.currency {
                after.currency = c.clone();
            }
            if let Some((shown, recipient)) = &patch.destination {
                after.destination = Json(shown.clone());
                after.recipient = recipient.clone();
            }
            if let Some(a) = patch.auto_fulfill {
                after.auto_fulfill = a;
            }
            if let Some(d) = &patch.description {
                after.description = Some(d.clone());
            }
            if let Some(md) = &patch.metadata {
                after.metadata = Json(md.clone());
            }
            save(deps, m, after).await
        }
        Command::Confirm => {
            let to = machine::confirm(status, m.auto_fulfill)?;
            after.status = to;
            after.reserved = true;
            submit(deps, m, after, now).await
        }
        Command::Fulfill => {
            after.status = machine::fulfill(status)?;
            submit(deps, m, after, now).await
        }
        Command::Cancel => {
            if machine::cancel(status)? == Cancel::AtProcessor {
                let submitted = m.submitted_at.unwrap_or(m.updated_at);
                if !processor::cancel(&m.recipient, submitted, now, deps.delay) {
                    // Paid out meanwhile: record what the processor says, and refuse.
                    sync(deps, m, now).await?;
                    return Err(PayoutError::NotCancellable);
                }
            }
            after.status = Status::Cancelled;
            after.reserved = false;
            save(deps, m, after).await
        }
        Command::Sync => sync(deps, m, now).await,
        Command::Expire => {
            let due = machine::expires_at(m.created_at);
            match machine::expire(status).filter(|_| now >= due) {
                Some(to) => {
                    after.status = to;
                    after.reserved = false;
                    save(deps, m, after).await
                }
                None => Ok(m.clone()),
            }
        }
    }
}

/// Commits `after`; if it goes to the processor (`initiated`), records when, then asks.
async fn submit(
    deps: &PayoutDeps,
    before: &payout::Model,
    mut after: payout::Model,
    now: DateTime<Utc>,
) -> Result<payout::Model, PayoutError> {
    let to_processor = after.status == Status::Initiated;
    if to_processor {
        after.submitted_at = Some(now);
    }
    let saved = save(deps, before, after).await?;
    match to_processor {
        true => sync(deps, &saved, now).await,
        false => Ok(saved),
    }
}

/// Asks the processor about a payout it has, and commits what changed.
async fn sync(
    deps: &PayoutDeps,
    m: &payout::Model,
    now: DateTime<Utc>,
) -> Result<payout::Model, PayoutError> {
    let Some(submitted) = m.submitted_at else {
        return Ok(m.clone());
    };
    let outcome = processor::status(&m.recipient, submitted, now, deps.delay);
    let Some(to) = machine::follow(m.status, &outcome) else {
        return Ok(m.clone());
    };
    let mut after = m.clone();
    after.updated_at = now;
    after.status = to;
    after.reserved = to.holds_funds();
    if let Outcome::Failed { code, message } = &outcome {
        after.failure_code = Some(code.clone());
        after.failure_message = Some(message.clone());
    }
    if to == Status::Ineligible {
        after.failure_code = Some("ineligible_destination".into());
        after.failure_message = Some("the destination cannot receive payouts".into());
    }
    after.processor_reference = Some(format!("sbx_po_{}", &m.id[3..]));
    save(deps, m, after).await
}
