//! The values payd's columns hold, below `payd-entity` and `payd`: each closed set a column
//! stores (a status, a stage, a method) is an enum here, and the entity names it, so a row is
//! read as that enum or not at all.
//!
//! One policy for a stored value that does not decode (the stored-JSON policy of
//! `payd::stored`, now for enums): it is corrupt, so the read fails as a database fault does —
//! logged with its column and row, answered 500, and the command that read it stops before it
//! writes. It is never read as a neighbouring value: an unknown payout status read as `failed`
//! would release the funds a payout holds.
//!
//! This crate depends on no crate of payd's (the architecture test holds it to that), and its
//! types carry no behaviour beyond what their values mean.

#[macro_use]
mod text;

pub mod address;
pub mod audit;
pub mod cards;
pub mod catalog;
pub mod disputes;
pub mod files;
pub mod idempotency;
pub mod ids;
pub mod invoices;
pub mod json;
pub mod keys;
pub mod ledger;
pub mod locale;
pub mod mandates;
pub mod metadata;
pub mod payments;
pub mod payouts;
pub mod processors;
pub mod refunds;
pub mod risk;
pub mod subscriptions;
pub mod wallet;
pub mod webhooks;
