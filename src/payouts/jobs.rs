//! The payouts' scheduled jobs: ask the processor about a payout it has; expire one that never
//! went to it.

use super::{
    actor::{Command, Exec, PayoutError},
    store, Payouts,
};
use crate::scheduler::{Job, Outcome, Scheduler};

pub fn register(scheduler: &mut Scheduler, payouts: &Payouts) {
    for (kind, command) in [
        (store::SYNC_JOB, Command::Sync),
        (store::EXPIRY_JOB, Command::Expire),
    ] {
        let payouts = payouts.clone();
        scheduler.register(kind, move |job: Job| {
            let (payouts, command) = (payouts.clone(), command.clone());
            async move {
                let exec = Exec {
                    scope: None,
                    command,
                    timeline: crate::clock::current(),
                };
                // A committed sync schedules the next one itself.
                match payouts.send(&job.entity_id, exec).await {
                    Ok(Ok(_)) | Err(payd_actors::ActorError::Load(PayoutError::NotFound)) => {
                        Outcome::Done
                    }
                    Ok(Err(e)) => Outcome::Failed(e.to_string()),
                    Err(e) => Outcome::Failed(e.to_string()),
                }
            }
        });
    }
}
