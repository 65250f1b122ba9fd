//! Payments: the lifecycle of DESIGN §6 through one actor per payment, sandbox processors and
//! per-shop routing, with attempts, status history, product lines and hosted checkout.

pub mod actor;
pub mod api;
pub mod checkout;
pub mod commands;
pub mod create;
pub mod intent;
pub mod jobs;
pub mod machine;
pub mod refunds;
pub mod routes;
pub mod routing;
mod rows;
pub mod shop_routes;
pub mod store;
pub mod stripe_events;

pub use actor::Payments;
pub use routes::configure;
