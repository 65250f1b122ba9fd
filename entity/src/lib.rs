//! payd's SeaORM entities: one module per table, named after the table's noun.

pub mod api_key;
pub mod audit_entry;
pub mod customer;
pub mod delivery;
pub mod delivery_attempt;
pub mod dispute;
pub mod dispute_evidence;
pub mod event;
pub mod file;
pub mod file_chunk;
pub mod idempotency_key;
pub mod mandate;
pub mod merchant;
pub mod payment;
pub mod payment_attempt;
pub mod payment_method;
pub mod payment_status_history;
pub mod processor_account;
pub mod profile;
pub mod refund;
pub mod routing_config;
pub mod scheduled_job;
pub mod wallet_case;
pub mod wallet_case_entry;
pub mod webhook_endpoint;
