//! The wallet cases' scheduled job: the wallet processor's next move on a seller case.

use super::{follow, processor::Due, store, WalletDeps};
use crate::scheduler::{Job, Outcome, Scheduler};

pub fn register(scheduler: &mut Scheduler, wallet: &actix_web::web::Data<WalletDeps>) {
    let wallet = wallet.clone();
    scheduler.register(store::DUE_JOB, move |job: Job| {
        let wallet = wallet.clone();
        async move {
            match follow::run_due(&wallet, &job.entity_id).await {
                Ok(Due::Moved(_)) => Outcome::Done,
                // Not due yet (the clock moved back): keep the job for then.
                Ok(Due::NotYet(Some(at))) => Outcome::RunAt(at),
                Ok(Due::NotYet(None)) => Outcome::Done,
                Err(e) if e.gone() => Outcome::Done,
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
    });
}
