//! Merchants, shops and API keys: the admin routes that create, list, suspend and issue keys to
//! merchants, and the `/account` routes with which a merchant manages its own shops and keys.

pub mod admin;
pub mod api;
pub mod demo;
pub mod routes;
pub mod store;

pub use admin::ROUTES as ADMIN_ROUTES;
pub use routes::ROUTES;
