//! Wallet cases onto disputes. Each case maps onto one dispute (its `dispute_id` stable across
//! imports): the payment's actor opens it, at the case's stage, so that its opening and the
//! payment's refunds never interleave; every later change goes through the dispute's actor as
//! [`Command::Follow`], which skips a case version it followed already — so importing twice
//! changes nothing and announces nothing.
//!
//! An import, or a seller's action through payd, opens a case's dispute; the processor's own
//! moves (the buyer's withdrawal or escalation, a review, a deadline) update the dispute of an
//! imported case as they happen, as a real processor's notification would.

use payd_entity::{dispute, payment, wallet_case};
use sea_orm::DbErr;

use super::{
    api::{Import, ImportReport, Imported},
    machine::{self, CaseType, Request},
    processor::{self, Due, Opening, SandboxWallet, WalletError},
    store,
};
use crate::{
    auth::keys::Scope,
    disputes::{
        self,
        actor::{
            CaseOpening, Command as DisputeCommand, DisputeError, Disputes, Exec as DisputeExec,
            Followed,
        },
    },
    error::Unanswered,
    payments::{
        self,
        actor::{Command as PaymentCommand, Exec as PaymentExec, PaymentError, Payments},
    },
};

/// What the wallet routes and the processor's jobs need.
pub struct WalletDeps {
    pub processor: SandboxWallet,
    pub payments: Payments,
    pub disputes: Disputes,
}

/// Why a case could not be opened, acted on, imported or followed. The routes map it to the
/// API's error.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("no such payment")]
    NoSuchPayment,
    #[error("no such file")]
    NoSuchFile,
    /// A case `import` was asked for by id is not the caller's.
    #[error("no such case {0}")]
    NoSuchListedCase(String),
    #[error("the payment has nothing captured and not refunded to dispute")]
    NothingToDispute,
    #[error("the amount must be 1 to {left}: what is captured and not refunded")]
    ExceedsDisputable { left: i64 },
    /// The payment has this case already; `None`: another request opened it meanwhile.
    #[error("the payment already has {} (one case per payment)", .0.as_deref().map_or("a case".to_owned(), |c| format!("case {c}")))]
    CaseExists(Option<String>),
    #[error("the payment already has a dispute (one per payment)")]
    AlreadyDisputed,
    #[error(transparent)]
    Case(#[from] WalletError),
    #[error(transparent)]
    Payment(#[from] PaymentError),
    #[error(transparent)]
    Dispute(#[from] DisputeError),
    #[error(transparent)]
    Unanswered(#[from] Unanswered),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

impl<E: Into<FollowError>> From<payd_actors::ActorError<E>> for FollowError {
    fn from(e: payd_actors::ActorError<E>) -> Self {
        Unanswered::fold(e)
    }
}

impl FollowError {
    /// The case, or what it follows, is gone: its job has nothing left to do.
    pub fn gone(&self) -> bool {
        matches!(
            self,
            FollowError::NoSuchPayment
                | FollowError::Case(WalletError::NotFound)
                | FollowError::Payment(PaymentError::NotFound)
                | FollowError::Dispute(DisputeError::NotFound)
        )
    }
}

/// A case of the caller's scope, or 404.
pub async fn owned(
    deps: &WalletDeps,
    scope: &Scope,
    case_id: &str,
) -> Result<wallet_case::Model, FollowError> {
    let Some(case_id) = crate::ids::CaseId::parse(case_id) else {
        return Err(WalletError::NotFound.into());
    };
    crate::owned::find_owned(&deps.processor.db, &case_id, scope)
        .await?
        .ok_or(FollowError::Case(WalletError::NotFound))
}

/// The sandbox buyer opens a case against a captured payment of the caller's scope.
pub async fn open(
    deps: &WalletDeps,
    scope: &Scope,
    payment_id: &str,
    case_type: CaseType,
    reason: String,
    amount: Option<i64>,
) -> Result<wallet_case::Model, FollowError> {
    let db = &deps.processor.db;
    let id = crate::ids::PaymentId::parse(payment_id).ok_or(FollowError::NoSuchPayment)?;
    let payment: payment::Model = crate::owned::find_owned(db, &id, scope)
        .await?
        .ok_or(FollowError::NoSuchPayment)?;
    let left = payments::machine::dispute_amount(&payments::api::state_of(&payment))
        .ok_or(FollowError::NothingToDispute)?;
    let amount = amount.unwrap_or(left);
    if amount <= 0 || amount > left {
        return Err(FollowError::ExceedsDisputable { left });
    }
    if let Some(c) = store::of_payment(db, payment_id).await? {
        return Err(FollowError::CaseExists(Some(c.id)));
    }
    if !disputes::store::of_payment(db, payment_id)
        .await?
        .is_empty()
    {
        return Err(FollowError::AlreadyDisputed);
    }
    let opening = Opening {
        case_type,
        reason,
        amount,
    };
    match deps.processor.open(&payment, &opening).await {
        // Another request opened one meanwhile (the unique index on the payment said no).
        Err(WalletError::Db(e))
            if matches!(
                e.sql_err(),
                Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
            ) =>
        {
            Err(FollowError::CaseExists(None))
        }
        other => Ok(other?),
    }
}

/// The seller's action on a case, then its dispute follows (opened first if the case was not
/// imported yet). Evidence files must be the merchant's.
pub async fn act(
    deps: &WalletDeps,
    scope: &Scope,
    case_id: &str,
    req: Request,
) -> Result<(wallet_case::Model, Option<dispute::Model>), FollowError> {
    let case = owned(deps, scope, case_id).await?;
    if let Request::ProvideEvidence { file_ids, .. } = &req {
        let files = Scope::whole(&case.merchant_id, case.test_mode);
        for f in file_ids {
            let f = crate::ids::FileId::parse(f).ok_or(FollowError::NoSuchFile)?;
            crate::owned::find_owned(&deps.processor.db, &f, &files)
                .await?
                .ok_or(FollowError::NoSuchFile)?;
        }
    }
    let case = deps.processor.act(&case.id, &req).await?;
    let (_, dispute) = follow(deps, &case, true).await?;
    Ok((case, dispute))
}

/// The sandbox buyer withdraws (`escalate: false`) or escalates a case; an imported case's
/// dispute follows.
pub async fn buyer(
    deps: &WalletDeps,
    scope: &Scope,
    case_id: &str,
    escalate: bool,
) -> Result<(wallet_case::Model, Option<dispute::Model>), FollowError> {
    let case = owned(deps, scope, case_id).await?;
    let case = match escalate {
        true => deps.processor.escalate(&case.id).await?,
        false => deps.processor.withdraw(&case.id).await?,
    };
    let (_, dispute) = follow(deps, &case, false).await?;
    Ok((case, dispute))
}

/// The processor's due move on a case (its job); an imported case's dispute follows.
pub async fn run_due(deps: &WalletDeps, case_id: &str) -> Result<Due, FollowError> {
    let due = deps.processor.run_due(case_id).await?;
    if let Due::Moved(case) = &due {
        follow(deps, case, false).await?;
    }
    Ok(due)
}

/// Imports the cases of the caller's scope (or those named): each case's dispute is opened or
/// follows the case.
pub async fn import(
    deps: &WalletDeps,
    scope: &Scope,
    shop: Option<&str>,
    req: &Import,
) -> Result<ImportReport, FollowError> {
    let limit = req.limit;
    let (cases, has_more) = match &req.case_ids {
        Some(ids) => {
            let mut cases = Vec::with_capacity(ids.len());
            for id in ids {
                cases.push(owned(deps, scope, id).await.map_err(|e| match e {
                    FollowError::Case(WalletError::NotFound) => {
                        FollowError::NoSuchListedCase(id.clone())
                    }
                    e => e,
                })?);
            }
            (cases, false)
        }
        None => {
            let mut cases = store::all(
                &deps.processor.db,
                scope.merchant_id.as_str(),
                scope.test_mode,
                shop,
                req.starting_after.as_deref(),
                limit + 1,
            )
            .await?;
            let more = cases.len() > limit as usize;
            cases.truncate(limit as usize);
            (cases, more)
        }
    };
    let mut report = ImportReport {
        data: Vec::with_capacity(cases.len()),
        created: 0,
        updated: 0,
        unchanged: 0,
        skipped: 0,
        has_more,
        last_case_id: cases.last().map(|c| c.id.clone()),
    };
    for case in &cases {
        let (result, dispute) = follow(deps, case, true).await?;
        match result {
            Mapping::Created => report.created += 1,
            Mapping::Updated => report.updated += 1,
            Mapping::Unchanged => report.unchanged += 1,
            Mapping::Skipped => report.skipped += 1,
        }
        report.data.push(Imported {
            case_id: case.id.clone(),
            dispute_id: dispute.as_ref().map(|d| d.id.to_string()),
            result: result.as_str().to_owned(),
            dispute_status: dispute.map(|d| d.status.to_string()),
        });
    }
    Ok(report)
}

/// What following a case did to its dispute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mapping {
    Created,
    Updated,
    Unchanged,
    /// No dispute: not imported yet (and not to be opened now), or the payment could not take
    /// one (nothing left to dispute, or disputed otherwise).
    Skipped,
}

impl Mapping {
    fn as_str(self) -> &'static str {
        match self {
            Mapping::Created => "created",
            Mapping::Updated => "updated",
            Mapping::Unchanged => "unchanged",
            Mapping::Skipped => "skipped",
        }
    }
}

/// Brings the case's dispute up to the case: opens it (when `open`) through the payment's
/// actor if there is none, then sends it the case as it is now.
async fn follow(
    deps: &WalletDeps,
    case: &wallet_case::Model,
    open: bool,
) -> Result<(Mapping, Option<dispute::Model>), FollowError> {
    let db = &deps.processor.db;
    let c = store::case_of(case);
    let mapped = machine::mapped(&c);
    let (dispute, created) = match disputes::store::by_case(db, &case.id).await? {
        Some(d) => (d, false),
        None if !open => return Ok((Mapping::Skipped, None)),
        None => {
            let opening = CaseOpening {
                case_id: case.id.clone(),
                stage: mapped.stage,
                reason: case.reason.clone(),
                amount: case.amount,
                processor: processor::NAME.to_owned(),
                due_by: case.due_at.unwrap_or(case.updated_at),
            };
            let done = deps
                .payments
                .send(
                    &case.payment_id,
                    PaymentExec::own(PaymentCommand::ImportCase(opening)),
                )
                .await??;
            // Created only when this import's commit opened it; another import (on this
            // instance or another) that opened it first leaves the one to follow.
            match done.dispute {
                Some(d) => (d, true),
                None => match disputes::store::by_case(db, &case.id).await? {
                    Some(d) => (d, false),
                    None => return Ok((Mapping::Skipped, None)),
                },
            }
        }
    };
    let followed = Followed {
        case_version: case.version,
        stage: mapped.stage,
        status: mapped.status,
        amount: mapped.amount,
        note: case.note.clone(),
        due_by: (c.status == machine::Status::WaitingForSellerResponse)
            .then_some(case.due_at)
            .flatten(),
    };
    let done = deps
        .disputes
        .send(
            &dispute.id,
            DisputeExec {
                access: None,
                command: DisputeCommand::Follow(followed),
                timeline: crate::clock::current(),
            },
        )
        .await??;
    let result = match (created, done.dispute.version != dispute.version) {
        (true, _) => Mapping::Created,
        (false, true) => Mapping::Updated,
        (false, false) => Mapping::Unchanged,
    };
    Ok((result, Some(done.dispute)))
}
