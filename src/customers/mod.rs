//! Customers, their saved payment methods and their mandates: the routes, the store, and the
//! saving of a card when a payment asks for it (`setup_future_usage`).

pub mod api;
pub mod jobs;
pub mod routes;
pub mod store;

pub use routes::configure;
