//! payd's SeaORM entities: one module per table, named after the table's noun.

pub mod api_key;
pub mod idempotency_key;
pub mod merchant;
pub mod profile;
pub mod scheduled_job;
