//! Sales reports: what a product's payment lines sold and what line refunds gave back. Built
//! from payments and refunds as they are stored, so dependencies run `sales → payments,
//! products`, never back.

pub mod routes;
pub mod store;
pub mod tally;

pub use routes::ROUTES;
