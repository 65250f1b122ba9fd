//! Events: the routes that list events, show their attempts and replay them. Events are
//! recorded by the outbox (`crate::outbox`), in the transaction of the change they announce.

pub mod routes;

pub use routes::ROUTES;
