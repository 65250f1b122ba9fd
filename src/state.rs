//! What every handler can reach: the database, settings, clock, scheduler, the actors'
//! threads and the webhook dispatcher. It names no resource: each resource's actors are app
//! data of their own (`web::Data<Payments>`), registered by `app.rs`.

use std::sync::Arc;

use payd_actors::ArbiterPool;

use crate::commit::Db;
use crate::{
    clock::SharedClock, scheduler::Scheduler, settings::Settings, webhooks::dispatcher::Dispatcher,
};

pub struct AppState {
    pub db: Db,
    pub settings: Arc<Settings>,
    pub clock: SharedClock,
    pub scheduler: Arc<Scheduler>,
    /// The threads that host keyed actors.
    pub arbiters: Arc<ArbiterPool>,
    /// The base of URLs handed to buyers (`checkout_url`).
    pub public_url: String,
    pub dispatcher: Arc<Dispatcher>,
    /// Seals and opens stored secrets.
    pub keyring: Arc<crate::sealed::Keyring>,
    /// Shops known to belong to their merchants (spares the `x-profile-id` query).
    pub shops: crate::auth::keys::KnownShops,
}
