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

use crate::mount::{Env, Mount};

/// Invoices and credit notes: their actors, jobs and routes, and the invoice settings' routes.
pub fn mount(m: &mut Mount, env: &Env<'_>) {
    let invoices: Invoices = env.registry(std::sync::Arc::new(actor::InvoiceDeps {
        db: env.db.clone(),
        clock: env.clock.clone(),
        wake: env.wake.clone(),
    }));
    jobs::register(&mut m.scheduler, &invoices);
    m.actors(invoices);
    m.routes(&[routes::ROUTES, settings_routes::ROUTES]);
}
