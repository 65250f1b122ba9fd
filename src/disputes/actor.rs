//! The dispute actor: one per dispute id. It serializes every change of its dispute — accept,
//! attach and remove evidence, submit, the processor's verdict, the deadline — and commits
//! each with a compare-and-set on the row's version.

use std::sync::Arc;

use actix::Message;
use chrono::{DateTime, Duration, Utc};
use payd_entity::{dispute, dispute_evidence, file};
use sea_orm::DbErr;
use sha2::Digest;

use super::{
    machine::{self, Refusal, Stage, Status},
    store::{self, CommitError, EvidenceChange, MAX_EVIDENCE},
};
use crate::commit::Db;
use crate::{
    auth::keys::Scope,
    clock::{SharedClock, Timeline},
    commit,
    conflict::Conflict,
    processors::{connect::Connections, sandbox::Sandbox, ProcessorError},
    row_actor::{Row, RowActor},
    wake::Wake,
};

/// What the dispute actors need.
#[derive(Clone)]
pub struct DisputeDeps {
    pub db: Db,
    pub clock: SharedClock,
    /// Decides the card sandbox's challenged disputes.
    pub sandbox: Arc<Sandbox>,
    /// The processors that hold their own disputes (Stripe's): a merchant's accept and submit
    /// go to them first.
    pub connections: Arc<Connections>,
    pub wake: Wake,
}

#[derive(Debug, thiserror::Error)]
pub enum DisputeError {
    #[error("no such dispute")]
    NotFound,
    #[error("no such file")]
    FileNotFound,
    #[error("the file is not attached to this dispute")]
    EvidenceNotFound,
    #[error("a dispute takes at most {MAX_EVIDENCE} evidence files")]
    TooMuchEvidence,
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("the dispute was changed concurrently")]
    LostRace,
    /// A condition the change needed no longer held when it was written.
    #[error(transparent)]
    Conflict(Conflict),
    /// The processor that holds the dispute did not take the merchant's command.
    #[error(transparent)]
    Processor(ProcessorError),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

impl From<CommitError> for DisputeError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::LostRace => DisputeError::LostRace,
            CommitError::Refused(c) => DisputeError::Conflict(c),
            CommitError::Db(e) => DisputeError::Db(e),
        }
    }
}

/// Who asks; `None` on a message means payd itself (a scheduled job).
#[derive(Debug, Clone)]
pub struct Access {
    /// The merchant, mode and shop the caller reaches.
    pub scope: Scope,
}

#[derive(Debug, Clone)]
pub enum Command {
    Accept,
    Attach {
        file_id: String,
        evidence_type: super::api::EvidenceType,
    },
    Remove {
        file_id: String,
    },
    Submit {
        explanation: Option<String>,
    },
    /// The processor decides a challenged dispute.
    Resolve,
    /// The response deadline.
    Expire,
    /// The wallet case the dispute follows changed.
    Follow(Followed),
}

/// A wallet case a dispute is to be opened for: the payment's actor opens it, at the case's
/// stage; the case's later changes reach the dispute as [`Command::Follow`].
#[derive(Debug, Clone)]
pub struct CaseOpening {
    pub case_id: String,
    pub stage: Stage,
    pub reason: String,
    /// What the buyer disputes (the payment's actor takes no more than is left to dispute).
    pub amount: i64,
    /// The processor's name.
    pub processor: String,
    /// When the seller must answer.
    pub due_by: DateTime<Utc>,
}

/// What a wallet case says its dispute now is, as of the case's `case_version`.
#[derive(Debug, Clone)]
pub struct Followed {
    pub case_version: i64,
    pub stage: Stage,
    pub status: Status,
    /// What the buyer disputes, or keeps after taking an offer.
    pub amount: i64,
    /// The seller's last note, kept as the explanation once the dispute is challenged.
    pub note: Option<String>,
    /// When the seller must answer, while the case waits for the seller.
    pub due_by: Option<DateTime<Utc>>,
}

/// A command's result: the dispute as it now is, and the evidence it attached.
#[derive(Debug, Clone)]
pub struct Done {
    pub dispute: dispute::Model,
    pub attached: Option<(dispute_evidence::Model, file::Model)>,
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<Done, DisputeError>")]
pub struct Exec {
    pub access: Option<Access>,
    pub command: Command,
    /// The timeline it was sent on (see `clock`).
    pub timeline: Timeline,
}

/// The registry of dispute actors.
pub type Disputes = payd_actors::Registry<RowActor<DisputeRow>>;

/// A dispute's actor (one per dispute): how its row is found and how its commands run.
pub struct DisputeRow;

impl Row for DisputeRow {
    const KIND: &'static str = "dispute";
    type Model = dispute::Model;
    type Deps = DisputeDeps;
    type Error = DisputeError;
    type Done = Done;
    type Exec = Exec;
    type Id = crate::ids::DisputeId;

    fn db(deps: &DisputeDeps) -> &Db {
        &deps.db
    }

    async fn find(db: &Db, id: &crate::ids::DisputeId) -> Result<Option<dispute::Model>, DbErr> {
        store::find(db, id).await
    }

    fn not_found() -> DisputeError {
        DisputeError::NotFound
    }

    fn is_not_found(error: &DisputeError) -> bool {
        matches!(error, DisputeError::NotFound)
    }

    fn owner(m: &dispute::Model) -> (&crate::ids::MerchantId, bool) {
        (&m.merchant_id, m.test_mode)
    }

    fn timeline(msg: &Exec) -> &Timeline {
        &msg.timeline
    }

    /// Runs a command; returns the latest known row (for the actor's cache) and the answer.
    async fn exec(
        deps: &DisputeDeps,
        current: dispute::Model,
        msg: Exec,
    ) -> (dispute::Model, Result<Done, DisputeError>) {
        if let Some(access) = &msg.access {
            let scope = &access.scope;
            if !scope.sees(&current.merchant_id, current.test_mode, &current.profile_id) {
                return (current, Err(DisputeError::NotFound));
            }
        }
        // Another instance may have changed the dispute: decide again on the stored row.
        commit::decide_fresh(
            current,
            async |d: &dispute::Model| step(deps, d, &msg.command).await,
            |result, d| match result {
                Err(DisputeError::LostRace | DisputeError::Refused(_)) => true,
                Ok(done) => done.dispute.version == d.version,
                Err(_) => false,
            },
            async |d: &dispute::Model| Ok(store::find(&deps.db, &d.id).await?),
            |done: &Done| &done.dispute,
            || DisputeError::NotFound,
        )
        .await
    }
}

async fn step(
    deps: &DisputeDeps,
    d: &dispute::Model,
    command: &Command,
) -> Result<Done, DisputeError> {
    let now = deps.clock.now();
    let status = d.status;
    let moved = |to: Status| {
        let mut after = d.clone();
        after.status = to;
        after.updated_at = now;
        after
    };
    let holder = machine::Holder::of(d.case_id.as_deref());
    if matches!(
        command,
        Command::Accept | Command::Attach { .. } | Command::Remove { .. } | Command::Submit { .. }
    ) {
        let files = matches!(command, Command::Attach { .. } | Command::Remove { .. });
        machine::check_merchant_command(holder, files)?;
    }
    let (after, evidence, attached) = match command {
        Command::Accept => {
            let to = machine::accept(status)?;
            tell_holder(deps, d, holder, Reply::Close).await?;
            (moved(to), EvidenceChange::None, None)
        }
        Command::Attach {
            file_id,
            evidence_type,
        } => {
            machine::check_evidence_edit(status)?;
            let row = attach(deps, d, file_id, *evidence_type, now).await?;
            let change = EvidenceChange::Attach(row.0.clone());
            (moved(status), change, Some(row))
        }
        Command::Remove { file_id } => {
            machine::check_evidence_edit(status)?;
            let existing = store::evidence(&deps.db, &d.id).await?;
            if !existing.iter().any(|(e, _)| &e.file_id == file_id) {
                return Err(DisputeError::EvidenceNotFound);
            }
            (
                moved(status),
                EvidenceChange::Remove {
                    file_id: file_id.clone(),
                },
                None,
            )
        }
        Command::Submit { explanation } => {
            let has_files = !store::evidence(&deps.db, &d.id).await?.is_empty();
            let has_text = explanation.as_deref().is_some_and(|t| !t.trim().is_empty());
            let mut after = moved(machine::submit(status, has_files || has_text)?);
            let text = explanation.as_deref().unwrap_or_default();
            tell_holder(deps, d, holder, Reply::Submit(text)).await?;
            after.explanation = explanation.clone();
            after.evidence_submitted_at = Some(now);
            (after, EvidenceChange::None, None)
        }
        // A case's dispute is decided by the case, never by the card sandbox's jobs.
        Command::Resolve | Command::Expire if d.case_id.is_some() => return Ok(unchanged(d)),
        Command::Follow(f) => match followed(d, status, f, now) {
            Some(after) => (after, EvidenceChange::None, None),
            None => return Ok(unchanged(d)),
        },
        Command::Resolve => {
            let verdict = deps.sandbox.dispute_verdict(d.explanation.as_deref());
            match machine::resolve(status, verdict) {
                Some(to) => (moved(to), EvidenceChange::None, None),
                None => return Ok(unchanged(d)),
            }
        }
        Command::Expire => match machine::expire(status, now, d.evidence_due_by) {
            Some(to) => (moved(to), EvidenceChange::None, None),
            None => return Ok(unchanged(d)),
        },
    };
    let (dispute, deliveries) =
        store::commit(&deps.db, d, after, evidence, resolve_delay(deps)).await?;
    if deliveries > 0 {
        deps.wake.now();
    }
    Ok(Done { dispute, attached })
}

/// The evidence row attaching one of the merchant's files makes, within the dispute's bound
/// (attaching a file again only changes its type).
async fn attach(
    deps: &DisputeDeps,
    d: &dispute::Model,
    file_id: &str,
    evidence_type: super::api::EvidenceType,
    now: DateTime<Utc>,
) -> Result<(dispute_evidence::Model, file::Model), DisputeError> {
    let file_id = crate::ids::FileId::parse(file_id).ok_or(DisputeError::FileNotFound)?;
    let scope = Scope::whole(&d.merchant_id, d.test_mode);
    let file = crate::owned::find_owned(&deps.db, &file_id, &scope)
        .await?
        .ok_or(DisputeError::FileNotFound)?;
    let existing = store::evidence(&deps.db, &d.id).await?;
    let replacing = existing.iter().any(|(e, _)| e.file_id == file.id);
    if !replacing && existing.len() >= MAX_EVIDENCE {
        return Err(DisputeError::TooMuchEvidence);
    }
    let row = dispute_evidence::Model {
        dispute_id: d.id.clone(),
        file_id: file.id.clone(),
        evidence_type,
        created_at: now,
    };
    Ok((row, file))
}

/// The merchant's answer to a dispute, as the processor that holds it is told.
enum Reply<'t> {
    Close,
    Submit(&'t str),
}

/// Tells the processor that holds the dispute (Stripe) the merchant's answer, before payd
/// commits it: nothing for a dispute payd decides. Each answer has its own idempotency key (a
/// submit's names its text), so a retry after a lost answer replays the processor's first.
async fn tell_holder(
    deps: &DisputeDeps,
    d: &dispute::Model,
    holder: machine::Holder<'_>,
    reply: Reply<'_>,
) -> Result<(), DisputeError> {
    let machine::Holder::Processor(case) = holder else {
        return Ok(());
    };
    let account = store::processor_account(&deps.db, d).await?;
    let processor = account
        .as_ref()
        .and_then(|a| deps.connections.resolve(Some(a)))
        .ok_or_else(|| {
            DisputeError::Processor(ProcessorError::Unavailable(format!(
                "the shop has no usable processor account {}",
                d.processor.as_deref().unwrap_or("(none)")
            )))
        })?;
    let told = match reply {
        Reply::Close => {
            processor
                .close_dispute(case, &format!("{}.close", d.id))
                .await
        }
        Reply::Submit(text) => {
            let digest = sha2::Sha256::digest(text.as_bytes());
            let key = format!("{}.submit.{}", d.id, hex::encode(&digest[..8]));
            processor.submit_dispute(case, text, &key).await
        }
    };
    told.map_err(DisputeError::Processor)
}

/// The dispute after its case moved; `None` when the case's version was followed already.
fn followed(
    d: &dispute::Model,
    status: Status,
    f: &Followed,
    now: DateTime<Utc>,
) -> Option<dispute::Model> {
    if d.case_version.is_some_and(|v| v >= f.case_version) {
        return None;
    }
    let stage = d.stage;
    let mut after = d.clone();
    after.case_version = Some(f.case_version);
    after.updated_at = now;
    let (stage, status) = match machine::follow((stage, status), (f.stage, f.status)) {
        Some((to_stage, to_status)) => {
            if to_status == Status::Challenged && status != Status::Challenged {
                after.evidence_submitted_at = Some(now);
                after.explanation = f.note.clone();
            }
            if to_status == Status::Accepted {
                after.amount = f.amount.min(d.amount);
            }
            (to_stage, to_status)
        }
        None => (stage, status),
    };
    if let (Status::Opened, Some(due)) = (status, f.due_by) {
        after.evidence_due_by = due;
    }
    after.stage = stage;
    after.status = status;
    Some(after)
}

fn unchanged(d: &dispute::Model) -> Done {
    Done {
        dispute: d.clone(),
        attached: None,
    }
}

fn resolve_delay(deps: &DisputeDeps) -> Duration {
    deps.sandbox.async_delay
}

/// When a dispute opened now must be answered (the sandbox gives seven days).
pub fn due_by(now: DateTime<Utc>) -> DateTime<Utc> {
    now + Duration::days(7)
}
