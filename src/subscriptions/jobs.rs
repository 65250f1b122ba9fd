//! The subscriptions' scheduled job: a subscription's next due moment (a renewal, a retry, a
//! check of a charge in flight, a scheduled cancellation, an expiry), a tick of its actor.

use super::{
    actor::{Command, Exec},
    cycles::SubscriptionError,
    store, Subscriptions,
};
use crate::scheduler::{Job, Outcome, Scheduler};

pub fn register(scheduler: &mut Scheduler, subscriptions: &Subscriptions) {
    let subs = subscriptions.clone();
    scheduler.register(store::TICK_JOB, move |job: Job| {
        let subs = subs.clone();
        async move {
            let exec = Exec {
                scope: None,
                command: Command::Tick,
                timeline: crate::clock::current(),
            };
            match subs.send(&job.entity_id, exec).await {
                // A tick that committed scheduled the next one itself (its lease is gone, so
                // this answer no longer applies); one that changed nothing keeps the job for
                // the subscription's next due moment.
                Ok(Ok(s)) => {
                    let deps = subs.deps();
                    match store::due_of(&deps.db, &s, deps.confirm_within).await {
                        Ok(Some(at)) => Outcome::RunAt(at),
                        Ok(None) => Outcome::Done,
                        Err(e) => Outcome::Failed(e.to_string()),
                    }
                }
                Err(payd_actors::ActorError::Load(SubscriptionError::NotFound)) => Outcome::Done,
                Ok(Err(e)) => Outcome::Failed(e.to_string()),
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
    });
}
