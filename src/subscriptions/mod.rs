//! Subscriptions: customers billed every period for recurring prices of the catalog, one actor
//! per subscription serializing every change. Billed by payd: each cycle is an off-session
//! payment against the saved method and mandate. Billed by a billing processor (adopted from
//! it): the processor collects each cycle. Dependencies run `subscriptions → payments,
//! customers, products`, never back.

pub mod actor;
pub mod adopt;
pub mod api;
pub mod billing;
pub mod create;
pub mod cycles;
pub mod estimate;
pub mod jobs;
pub mod machine;
pub mod plans;
pub mod processor_routes;
pub mod routes;
pub mod store;

pub use actor::Subscriptions;

use crate::{
    mount::{Env, Mount},
    payments::Payments,
};

/// The subscriptions: their actors (which charge through the payments' actors), jobs and
/// routes, the billing processor's literal paths first, before
/// `/subscriptions/{subscription_id}` could take them. A cycle is taxed by `tax` (the invoices'
/// rules: the folder does not import the invoices, which read its cycles).
pub fn mount(
    m: &mut Mount,
    env: &Env<'_>,
    payments: &Payments,
    tax: std::sync::Arc<dyn api::CycleTax>,
) {
    let (db, settings) = (env.db, &env.settings.subscriptions);
    let subscriptions: Subscriptions =
        env.registry(std::sync::Arc::new(cycles::SubscriptionDeps {
            db: db.clone(),
            clock: env.clock.clone(),
            payments: payments.clone(),
            wake: env.wake.clone(),
            public_url: env.public_url.to_owned(),
            retry_days: settings.retry_schedule_days.clone(),
            confirm_within: chrono::Duration::hours(i64::from(settings.confirm_within_hours)),
            billing: std::sync::Arc::new(billing::SandboxBilling { db: db.clone() }),
            sandbox_max: env.settings.sandbox.max_subscriptions,
            tax,
        }));
    jobs::register(&mut m.scheduler, &subscriptions);
    m.actors(subscriptions);
    m.routes(&[processor_routes::ROUTES, routes::ROUTES]);
}
