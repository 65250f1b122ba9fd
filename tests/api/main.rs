//! payd's integration tests: one crate, a module per resource or concern, each test starting
//! the real server on `127.0.0.1:0` with a private database and talking to it over HTTP
//! (`common` holds the test app, its clients and the counterparts: webhook receivers, the
//! sandbox simulator, localstripe and the strict Stripe layer, a browser, a PostgreSQL
//! formation).
//!
//! Select by module path: `cargo test --test api payments::` runs one module,
//! `cargo test --test api payments:: refunds::` two. What must have a process to itself (the
//! metrics recorder is global to a process) starts the `payd` binary (`common::child`).

mod common;

mod accounts;
mod billing;
mod billing_over_time;
mod browser;
mod customers;
mod db_outage;
mod disputes;
mod embed;
mod errors;
mod failover;
mod group_commit;
mod idempotency;
mod invoices;
mod listen;
mod log_hygiene;
mod lookups;
mod metrics;
mod migrations;
mod modes;
mod operator;
mod ops;
mod outbound;
mod payments;
mod payouts;
mod process;
mod products;
mod reference;
mod refunds;
mod remote;
mod risk;
mod scheduler;
mod secrets;
mod shop_scope;
mod stripe;
mod stripe_buyer;
mod stripe_live;
mod stripe_strict;
mod subscriptions;
mod versions;
mod wallet;
mod webhook_ops;
mod webhooks;
