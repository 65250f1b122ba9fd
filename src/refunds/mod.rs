//! Refunds: the routes, their request types and read queries. A refund is decided by the
//! payment's actor (`payments::refunds`), so dependencies run one way: refunds → payments.

pub mod api;
pub mod routes;
pub mod store;

pub use routes::ROUTES;
