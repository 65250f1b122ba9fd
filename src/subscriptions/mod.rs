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
pub mod jobs;
pub mod machine;
pub mod plans;
pub mod processor_routes;
pub mod routes;
pub mod store;

pub use actor::Subscriptions;

/// The routes: the billing processor's literal paths first, before
/// `/subscriptions/{subscription_id}` could take them.
pub fn configure(cfg: &mut actix_web::web::ServiceConfig) {
    processor_routes::configure(cfg);
    routes::configure(cfg);
}
