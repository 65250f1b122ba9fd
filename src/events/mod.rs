//! Events: the outbox that records an event (and its deliveries) in the transaction of the
//! change it announces, and the routes that list events, show their attempts and replay them.

pub mod outbox;
pub mod routes;

pub use routes::configure;
