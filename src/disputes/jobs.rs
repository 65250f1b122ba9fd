//! The disputes' scheduled jobs: the evidence deadline and the processor's verdict, each a
//! command to the dispute's actor.

use super::{
    actor::{Command, DisputeError, Exec},
    store, Disputes,
};
use crate::scheduler::{Job, Outcome, Scheduler};

pub fn register(scheduler: &mut Scheduler, disputes: &Disputes) {
    for (kind, command) in [
        (store::DEADLINE_JOB, Command::Expire),
        (store::RESOLVE_JOB, Command::Resolve),
    ] {
        let disputes = disputes.clone();
        scheduler.register(kind, move |job: Job| {
            let (disputes, command) = (disputes.clone(), command.clone());
            async move {
                let exec = Exec {
                    access: None,
                    command,
                    timeline: crate::clock::current(),
                };
                match disputes.send(&job.entity_id, exec).await {
                    // A deadline that has not passed yet (the clock moved back): keep it.
                    Ok(Ok(done))
                        if kind == store::DEADLINE_JOB
                            && done.dispute.status == super::machine::Status::Opened =>
                    {
                        Outcome::RunAt(done.dispute.evidence_due_by)
                    }
                    Ok(Ok(_)) | Err(payd_actors::ActorError::Load(DisputeError::NotFound)) => {
                        Outcome::Done
                    }
                    Ok(Err(e)) => Outcome::Failed(e.to_string()),
                    Err(e) => Outcome::Failed(e.to_string()),
                }
            }
        });
    }
}
