//! The sandbox test clock: one per merchant, an offset from the base time that only moves
//! forward. Advancing it moves the merchant's scheduled jobs with it and runs those that fall
//! due on the way, in time order, each at its own due time (see `clock` for timelines).

pub mod advance;
pub mod routes;
pub mod store;

pub use routes::ROUTES;
