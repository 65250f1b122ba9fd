//! A shop's ledger: every movement of its money is an immutable entry (`bt_…`), written in the
//! same commit as the change that causes it; its balances are the entries' sums.

pub mod api;
pub mod machine;
pub mod routes;
pub mod store;

pub use routes::ROUTES;
