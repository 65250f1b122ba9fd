//! payd: a self-hostable payment service. The library holds the whole server so that tests
//! and tools can build it in-process; `main.rs` is only the command line.

pub mod accounts;
pub mod alloc;
pub mod app;
pub mod auth;
pub mod clock;
pub mod commit;
pub mod customers;
pub mod db;
pub mod disputes;
pub mod error;
pub mod events;
pub mod fields;
pub mod files;
pub mod http;
pub mod idempotency;
pub mod ids;
pub mod invoices;
pub mod ledger;
pub mod listen;
pub mod openapi;
pub mod ops;
pub mod outbound;
pub mod pagination;
pub mod payments;
pub mod payouts;
pub mod processors;
pub mod products;
pub mod ratelimit;
pub mod recovery;
pub mod refunds;
pub mod risk;
pub mod sales;
pub mod scheduler;
pub mod sealed;
pub mod settings;
pub mod state;
pub mod subscriptions;
pub mod telemetry;
pub mod test_clock;
pub mod wallet;
pub mod webhooks;

pub use app::Application;
pub use settings::Settings;
pub use state::AppState;
