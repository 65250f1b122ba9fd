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
pub use routes::configure;
