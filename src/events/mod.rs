//! Events: the routes that list events, show their attempts and replay them. Events are
//! recorded by the outbox (`crate::outbox`), in the transaction of the change they announce.

pub mod api;
pub mod routes;
pub mod store;

pub use routes::ROUTES;
