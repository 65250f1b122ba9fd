//! Merchants, shops and API keys: the admin route that creates a merchant, and the
//! `/account` routes with which a merchant manages its own shops and keys.

pub mod api;
pub mod demo;
pub mod routes;
pub mod store;

pub use routes::{shop_in_path, ROUTES};
