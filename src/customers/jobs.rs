//! The customers' scheduled job: a mandate with an end date becomes `inactive` at it.

use super::store;
use crate::{
    clock::SharedClock,
    commit::Db,
    scheduler::{Job, Outcome, Scheduler},
};

pub fn register(scheduler: &mut Scheduler, db: &Db, clock: &SharedClock) {
    let (db, clock) = (db.clone(), clock.clone());
    scheduler.register(store::MANDATE_EXPIRY_JOB, move |job: Job| {
        let (db, clock) = (db.clone(), clock.clone());
        async move {
            match store::expire_mandate(&db, &job.entity_id, clock.now()).await {
                Ok(true) => Outcome::Done,
                Ok(false) => Outcome::Failed("the mandate changed meanwhile".into()),
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
    });
}
