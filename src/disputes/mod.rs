//! Disputes: a buyer's chargeback against a captured payment, the merchant's evidence, and
//! the processor's verdict. The payment's actor opens a dispute (so that refunds and a
//! dispute's opening never interleave); the dispute's own actor serializes everything after.

pub mod actor;
pub mod api;
pub mod jobs;
pub mod machine;
pub mod routes;
pub mod store;

pub use actor::Disputes;

use crate::mount::{Env, Mount};

/// The disputes: their actors, jobs and routes.
pub fn mount(m: &mut Mount, env: &Env<'_>) -> Disputes {
    let disputes: Disputes = env.registry(std::sync::Arc::new(actor::DisputeDeps {
        db: env.db.clone(),
        clock: env.clock.clone(),
        sandbox: env.sandbox.clone(),
        connections: env.connections.clone(),
        wake: env.wake.clone(),
    }));
    jobs::register(&mut m.scheduler, &disputes);
    m.actors(disputes.clone());
    m.routes(&[routes::ROUTES]);
    disputes
}
