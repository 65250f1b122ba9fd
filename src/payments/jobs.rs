//! The payments' scheduled jobs: an expiry, a settle (a payment still `processing`, or an
//! operation whose outcome was not recorded), a sandbox dispute's opening, and a refund's
//! settle — each a command to the payment's actor.

use super::{
    actor::{Command, Exec, PaymentError},
    store, Payments,
};
use crate::{
    commit::Db,
    scheduler::{Job, Outcome, Scheduler},
};

pub fn register(scheduler: &mut Scheduler, db: &Db, payments: &Payments) {
    for (kind, command) in [
        (store::EXPIRY_JOB, Command::Expire),
        (store::SETTLE_JOB, Command::Sync),
        (store::DISPUTE_OPEN_JOB, Command::OpenDispute),
    ] {
        let payments = payments.clone();
        scheduler.register(kind, move |job: Job| {
            let (payments, command) = (payments.clone(), command.clone());
            async move {
                match payments.send(&job.entity_id, Exec::own(command)).await {
                    Ok(Ok(_)) | Err(payd_actors::ActorError::Load(PaymentError::NotFound)) => {
                        Outcome::Done
                    }
                    Ok(Err(e)) => Outcome::Failed(e.to_string()),
                    Err(e) => Outcome::Failed(e.to_string()),
                }
            }
        });
    }
    let (db, payments) = (db.clone(), payments.clone());
    scheduler.register(store::REFUND_SETTLE_JOB, move |job: Job| {
        let (db, payments) = (db.clone(), payments.clone());
        async move {
            let Some(id) = crate::ids::RefundId::parse(&job.entity_id) else {
                return Outcome::Done;
            };
            let refund = match store::find_refund(&db, &id).await {
                Ok(Some(r)) => r,
                Ok(None) => return Outcome::Done,
                Err(e) => return Outcome::Failed(e.to_string()),
            };
            let command = Command::SettleRefund {
                refund_id: refund.id,
            };
            match payments.send(&refund.payment_id, Exec::own(command)).await {
                Ok(Ok(_)) => Outcome::Done,
                Ok(Err(e)) => Outcome::Failed(e.to_string()),
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
    });
}
