//! Customers, their saved payment methods and their mandates: the routes, the store, and the
//! saving of a card when a payment asks for it (`setup_future_usage`).

pub mod api;
pub mod jobs;
pub mod routes;
pub mod store;

use crate::mount::{Env, Mount};

/// Customers, their saved methods and mandates: the mandates' expiry job and the routes.
pub fn mount(m: &mut Mount, env: &Env<'_>) {
    jobs::register(&mut m.scheduler, env.db, env.clock);
    m.routes(&[routes::ROUTES]);
}
