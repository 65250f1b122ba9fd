//! Invoices and credit notes: drafts made from a payment, a billing cycle or lines; finalize
//! numbers them gapless per series, freezes their taxes and parties and renders the PDF once;
//! credit notes against them; share links for the buyer; the invoice settings and tax rules of
//! merchants and shops. One actor per invoice serializes its changes.

pub mod actor;
pub mod api;
pub mod create;
pub mod jobs;
pub mod machine;
pub mod pdf;
pub mod routes;
pub mod settings;
pub mod settings_routes;
pub mod store;
pub mod tax;

pub use actor::Invoices;

pub fn configure(cfg: &mut actix_web::web::ServiceConfig) {
    routes::configure(cfg);
    settings_routes::configure(cfg);
}
