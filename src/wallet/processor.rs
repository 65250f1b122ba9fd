//! The sandbox wallet processor: it keeps seller cases against a shop's captured payments,
//! takes the seller's actions, and — as the buyer and as the processor — replies, reviews,
//! withdraws and escalates. Its cases are its own records (`wallet_cases`), never payd's
//! disputes: payd learns of them by importing, as it would from a real wallet processor.
//!
//! Every change re-reads the case, asks the machine, and commits under the case's version;
//! a lost race reads again (at most [`TRIES`] times), so two instances never both apply an
//! action that only one of them may take.

use chrono::{DateTime, Utc};
use payd_entity::{payment, wallet_case};
use sea_orm::DbErr;

use super::{
    machine::{self, CaseType, Changed, Refusal, Request, Timing},
    store::{self, CommitError},
};
use crate::commit::Db;
use crate::{clock::SharedClock, commit, conflict::Conflict, ids::new_id};

/// Reads and commits of one change before giving up to a concurrent writer.
const TRIES: usize = 5;

/// At most this many history entries per case: a case past it takes no more messages.
pub const MAX_ENTRIES: i64 = 500;

/// The processor's name, as a dispute following one of its cases shows it.
pub const NAME: &str = "wallet_sandbox";

#[derive(Debug, thiserror::Error)]
pub enum WalletError {
    #[error("no such case")]
    NotFound,
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("the case has {MAX_ENTRIES} history entries, the most a case keeps")]
    TooManyEntries,
    #[error("the case was changed concurrently")]
    LostRace,
    /// A condition the change needed no longer held when it was written.
    #[error(transparent)]
    Conflict(Conflict),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

impl From<CommitError> for WalletError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::LostRace => WalletError::LostRace,
            CommitError::Refused(c) => WalletError::Conflict(c),
            CommitError::Db(e) => WalletError::Db(e),
        }
    }
}

/// What a new case is against.
#[derive(Debug, Clone)]
pub struct Opening {
    pub case_type: CaseType,
    pub reason: String,
    pub amount: i64,
}

pub struct SandboxWallet {
    pub db: Db,
    pub clock: SharedClock,
    pub timing: Timing,
}

impl SandboxWallet {
    /// The buyer opens a case against `payment` (one case per payment: the store's unique
    /// index refuses a second, which the caller checks first).
    pub async fn open(
        &self,
        payment: &payment::Model,
        o: &Opening,
    ) -> Result<wallet_case::Model, WalletError> {
        let now = self.clock.now();
        let opened = machine::open(o.case_type, o.amount, &o.reason, now, self.timing);
        let row = wallet_case::Model {
            id: new_id("case"),
            merchant_id: payment.merchant_id.clone(),
            profile_id: payment.profile_id.clone(),
            test_mode: payment.test_mode,
            payment_id: payment.id.clone(),
            case_type: opened.case.case_type,
            status: opened.case.status,
            outcome: opened.case.outcome,
            reason: o.reason.clone(),
            amount: o.amount,
            currency: payment.currency.clone(),
            offer_amount: None,
            return_shipped: false,
            note: None,
            due_at: None,
            entries: 0,
            version: 1,
            created_at: now,
            updated_at: now,
        };
        Ok(store::insert(&self.db, row, &opened, now).await?)
    }

    /// The seller's action.
    pub async fn act(
        &self,
        case_id: &str,
        req: &Request,
    ) -> Result<wallet_case::Model, WalletError> {
        let timing = self.timing;
        self.change(case_id, |row, now| {
            if row.entries >= MAX_ENTRIES {
                return Err(WalletError::TooManyEntries);
            }
            Ok(Some(machine::act(&store::case_of(row), req, now, timing)?))
        })
        .await?
        .ok_or(WalletError::NotFound)
    }

    /// The buyer withdraws the case.
    pub async fn withdraw(&self, case_id: &str) -> Result<wallet_case::Model, WalletError> {
        self.change(case_id, |row, _| {
            Ok(Some(machine::withdraw(&store::case_of(row))?))
        })
        .await?
        .ok_or(WalletError::NotFound)
    }

    /// The buyer escalates the case to its next stage.
    pub async fn escalate(&self, case_id: &str) -> Result<wallet_case::Model, WalletError> {
        let timing = self.timing;
        self.change(case_id, |row, now| {
            Ok(Some(machine::buyer_escalate(
                &store::case_of(row),
                now,
                timing,
            )?))
        })
        .await?
        .ok_or(WalletError::NotFound)
    }

    /// What is due on the case now (the buyer's reply, a review's decision, a deadline);
    /// `None` when nothing is, with the case's next due time.
    pub async fn run_due(&self, case_id: &str) -> Result<Due, WalletError> {
        let timing = self.timing;
        match self
            .change(case_id, |row, now| {
                Ok(machine::due(&store::case_of(row), now, timing))
            })
            .await
        {
            Ok(Some(row)) => Ok(Due::Moved(Box::new(row))),
            Ok(None) => match store::find(&self.db, case_id).await? {
                Some(row) => Ok(Due::NotYet(row.due_at)),
                None => Err(WalletError::NotFound),
            },
            Err(e) => Err(e),
        }
    }

    /// Read, decide, commit under the version, and again after a lost race. `Ok(None)` when the
    /// decision changes nothing (or the case does not exist).
    async fn change(
        &self,
        case_id: &str,
        decide: impl Fn(&wallet_case::Model, DateTime<Utc>) -> Result<Option<Changed>, WalletError>,
    ) -> Result<Option<wallet_case::Model>, WalletError> {
        commit::retrying(TRIES, || async {
            let Some(row) = store::find(&self.db, case_id).await? else {
                return Ok(Some(None));
            };
            let now = self.clock.now();
            let Some(changed) = decide(&row, now)? else {
                return Ok(Some(None));
            };
            Ok(commit::or_retry(store::commit(&self.db, &row, &changed, now).await)?.map(Some))
        })
        .await
    }
}

/// What a due job found.
#[derive(Debug)]
pub enum Due {
    /// The processor moved the case.
    Moved(Box<wallet_case::Model>),
    /// Nothing is due yet (the clock moved back): the next due time, if any.
    NotYet(Option<DateTime<Utc>>),
}
