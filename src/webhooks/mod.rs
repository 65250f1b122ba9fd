//! Webhook delivery: signing, the retry policy, the per-merchant delivery actors, the
//! dispatcher that feeds them, and the routes that configure a shop's endpoint.

pub mod api;
pub mod attempt;
pub mod delivery;
pub mod dispatcher;
pub mod health;
pub mod policy;
pub mod retention;
pub mod routes;
pub mod signer;
pub mod store;

pub use routes::configure;
