//! The invoices' scheduled jobs: a PDF a crash kept finalize from rendering, and the invoice
//! of a subscription cycle once the cycle is paid.

use super::{
    actor::{self, Command, Exec, InvoiceError},
    store, Invoices,
};
use crate::scheduler::{Job, Outcome, Scheduler};

pub fn register(scheduler: &mut Scheduler, invoices: &Invoices) {
    let pdf = invoices.clone();
    scheduler.register(store::PDF_JOB, move |job: Job| {
        let invoices = pdf.clone();
        async move {
            let exec = Exec {
                scope: None,
                command: Command::RenderPdf,
                timeline: crate::clock::current(),
            };
            match invoices.send(&job.entity_id, exec).await {
                Ok(Ok(_)) | Err(payd_actors::ActorError::Load(InvoiceError::NotFound)) => {
                    Outcome::Done
                }
                Ok(Err(e)) => Outcome::Failed(e.to_string()),
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
    });
    let paid = invoices.clone();
    scheduler.register(
        crate::subscriptions::store::CYCLE_PAID_JOB,
        move |job: Job| {
            let invoices = paid.clone();
            async move {
                match actor::cycle_paid(&invoices, &job.entity_id).await {
                    Ok(()) => Outcome::Done,
                    Err(e) => Outcome::Failed(e.to_string()),
                }
            }
        },
    );
}
