//! Wallet processor cases: the sandbox wallet processor's seller cases (inquiries that can
//! become chargebacks, with the processor's own statuses, history and actions), their routes,
//! and how each maps onto one dispute. Dependencies run `wallet → disputes, payments`, never
//! back: the dispute knows only the case id it follows.

pub mod api;
pub mod follow;
pub mod jobs;
pub mod machine;
pub mod processor;
pub mod routes;
pub mod store;

pub use follow::WalletDeps;
pub use routes::configure;
