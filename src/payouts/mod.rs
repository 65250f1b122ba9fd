//! Payouts of a shop's available balance: one actor per payout; the amount reserved in the
//! shop's ledger at confirm, paid, released or reversed as the sandbox payout processor says.

pub mod actor;
pub mod api;
pub mod jobs;
pub mod machine;
pub mod processor;
pub mod routes;
pub mod store;

pub use actor::Payouts;

use crate::mount::{Env, Mount};

/// The payouts: their actors, jobs and routes.
pub fn mount(m: &mut Mount, env: &Env<'_>) {
    let payouts: Payouts = env.registry(std::sync::Arc::new(actor::PayoutDeps {
        db: env.db.clone(),
        clock: env.clock.clone(),
        wake: env.wake.clone(),
        delay: env.sandbox.async_delay,
    }));
    jobs::register(&mut m.scheduler, &payouts);
    m.actors(payouts);
    m.routes(&[routes::ROUTES]);
}
