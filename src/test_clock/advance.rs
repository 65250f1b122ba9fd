//! Advancing a merchant's test clock: it steps to each of the merchant's jobs that falls due
//! before the target, runs it there (so a renewal, a retry or a deadline happens at its own
//! time, and whatever it schedules on the way runs too), then goes the rest of the way.

use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Duration, Utc};

use super::store;
use crate::commit::Db;
use crate::ids::MerchantId;
use crate::{clock::SharedClock, commit::CommitError, scheduler::Scheduler, subscriptions};

/// The longest single advance: ten years of 365 days (315 360 000 s, as documented).
pub const MAX_SECONDS: i64 = 10 * 365 * 86_400;

/// At most this many steps in one advance, and at most this long: past either, the clock goes
/// straight to its target and the jobs still due run in the background, in due order, at the
/// target time.
const MAX_STEPS: usize = 10_000;
const BUDGET: StdDuration = StdDuration::from_secs(20);

/// A merchant's clock as read.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pub now: DateTime<Utc>,
    pub offset_seconds: i64,
    /// The jobs this advance ran on its way (0 for a plain read).
    pub jobs_run: usize,
}

pub async fn read(
    db: &Db,
    clock: &SharedClock,
    merchant_id: &MerchantId,
) -> Result<Reading, CommitError> {
    let offset_seconds = store::offset(db, merchant_id).await?;
    Ok(Reading {
        now: clock.base() + Duration::seconds(offset_seconds),
        offset_seconds,
        jobs_run: 0,
    })
}

/// Why an advance was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum AdvanceError {
    /// It would renew the merchant's subscriptions more than `sandbox.max_advance_charges`
    /// times (this many, or more).
    #[error("the advance would make {renewals} subscription charges, more than {max}")]
    TooMuchWork { renewals: u64, max: u64 },
    #[error(transparent)]
    Commit(#[from] CommitError),
}

impl From<sea_orm::DbErr> for AdvanceError {
    fn from(e: sea_orm::DbErr) -> Self {
        AdvanceError::Commit(e.into())
    }
}

/// Moves the merchant's clock `seconds` forward (1 to [`MAX_SECONDS`]; the route checks), if
/// the renewals on the way are at most `max_charges`.
pub async fn advance(
    db: &Db,
    scheduler: &Scheduler,
    clock: &SharedClock,
    merchant_id: &MerchantId,
    seconds: i64,
    max_charges: u64,
) -> Result<Reading, AdvanceError> {
    let target = read(db, clock, merchant_id).await?.now + Duration::seconds(seconds);
    // One request must not make unbounded work: refused before anything moves.
    let renewals =
        subscriptions::store::renewals_until(db, merchant_id, target, max_charges).await?;
    if renewals > max_charges {
        return Err(AdvanceError::TooMuchWork {
            renewals,
            max: max_charges,
        });
    }
    let started = Instant::now();
    let mut jobs_run = 0;
    for _ in 0..MAX_STEPS {
        if started.elapsed() > BUDGET {
            break;
        }
        if store::running(db, merchant_id, clock.base()).await? {
            // A job of the merchant is running (here or on another instance): what it does
            // next (the payment of a renewal it recorded) happens before the clock moves on.
            actix_rt::time::sleep(StdDuration::from_millis(20)).await;
            continue;
        }
        let at = read(db, clock, merchant_id).await?;
        let offset = Duration::seconds(at.offset_seconds);
        let Some(due) = store::next_due(db, merchant_id)
            .await?
            .map(|d| d + offset)
            .filter(|d| *d <= target)
        else {
            break;
        };
        if due > at.now {
            let by = whole_seconds(due - at.now);
            store::shift(db, clock.base(), merchant_id, at.offset_seconds, by).await?;
        }
        // Each job runs on the merchant's timeline as it now reads (the scheduler scopes it).
        jobs_run += scheduler.tick_merchant(merchant_id).await?;
    }
    let at = read(db, clock, merchant_id).await?;
    if target > at.now {
        let by = whole_seconds(target - at.now);
        store::shift(db, clock.base(), merchant_id, at.offset_seconds, by).await?;
    }
    Ok(Reading {
        jobs_run,
        ..read(db, clock, merchant_id).await?
    })
}

/// A positive span in whole seconds, rounded up (a step lands on or just past a due time).
fn whole_seconds(d: Duration) -> i64 {
    let micros = d.num_microseconds().unwrap_or(i64::MAX / 2);
    (micros + 999_999) / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_round_up_to_whole_seconds() {
        assert_eq!(whole_seconds(Duration::microseconds(1)), 1);
        assert_eq!(whole_seconds(Duration::seconds(30)), 30);
        assert_eq!(whole_seconds(Duration::milliseconds(30_001)), 31);
    }
}
