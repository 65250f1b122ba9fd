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
pub use routes::configure;
