//! Payments: the lifecycle of DESIGN §6 through one actor per payment, sandbox processors and
//! per-shop routing, with attempts, status history, product lines and hosted checkout.

pub mod actor;
pub mod api;
pub mod charge;
pub mod checkout;
pub mod commands;
pub mod create;
pub mod intent;
pub mod jobs;
pub mod machine;
pub mod methods;
pub mod processor_accounts;
pub mod refunds;
pub mod routes;
pub mod routing;
mod rows;
pub mod shop_routes;
pub mod store;
pub mod stripe_events;

pub use actor::Payments;

use crate::mount::{Env, Mount};

/// The payments: their actors and jobs, and the routes of payments, of a shop's processors and
/// routing, of the hosted checkout and of a connected processor's events.
pub fn mount(m: &mut Mount, env: &Env<'_>) -> Payments {
    let payments: Payments = env.registry(std::sync::Arc::new(actor::PaymentDeps {
        db: env.db.clone(),
        clock: env.clock.clone(),
        settings: env.settings.clone(),
        sandbox: env.sandbox.clone(),
        public_url: env.public_url.to_owned(),
        wake: env.wake.clone(),
        connections: env.connections.clone(),
        routing: crate::lookups::Cache::new("shop_routing", env.generation),
        fresh: Default::default(),
        fail_outcomes: std::sync::Arc::new(store::FailOutcomes::new(
            &env.settings.sandbox.fail_outcome_commits,
        )),
    }));
    jobs::register(&mut m.scheduler, env.db, &payments);
    m.actors(payments.clone());
    m.routes(&[
        routes::ROUTES,
        shop_routes::ROUTES,
        checkout::ROUTES,
        stripe_events::ROUTES,
    ]);
    payments
}
